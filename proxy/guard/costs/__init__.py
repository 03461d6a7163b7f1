"""What a request costs: model prices, token estimates, spend on unread requests, background polls."""
