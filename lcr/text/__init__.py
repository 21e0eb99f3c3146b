"""Loading documents and cutting them into chunks with exact character spans."""
