"""``purgatory load``: HTTP clients that drive a running ``purgatory serve`` (long polls and
producers, or hostile sockets). They speak to the server over HTTP only and never import it
(an import-linter contract keeps it so)."""
