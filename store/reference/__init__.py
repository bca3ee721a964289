"""Reference data shipped with the product: the commodity taxonomy and the port directory."""
