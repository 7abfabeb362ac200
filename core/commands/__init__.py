"""One module per `leanseg` sub-command; each defines `register(subparsers)`."""
