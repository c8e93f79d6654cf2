"""Results files and the reports rendered from them."""
