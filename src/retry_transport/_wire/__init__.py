"""Pure reading of the wire: what a response's headers and a request's say, with no I/O.

``http`` (duck-typed reads of requests and responses, the metadata attached to them),
``retry_after`` (RFC 9110 delays and dates), ``signals`` (the other waits servers send) and
``sfv`` (structured field values, RFC 9651).
"""
