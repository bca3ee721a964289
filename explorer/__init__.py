"""The data explorer (Panel): see `explorer.app` for how it is served.

This package's own module stays free of Panel and Bokeh, so that what a server
needs before it imports them (the route it mounts the explorer at) costs nothing."""

#: The paths the explorer answers, under the API's port: /explorer and below.
ROUTE = r"/explorer(?:/.*)?"
