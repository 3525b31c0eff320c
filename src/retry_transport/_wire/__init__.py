"""Pure reading of the wire: what a response's headers and a request's say, with no I/O.

``http`` (duck-typed reads of requests and responses, the metadata attached to them),
``retry_after`` (RFC 9110 delays and dates), ``signals`` (the other waits servers send),
``sfv`` (structured field values, RFC 9651), ``resumable`` (which bodies can be resumed
after a break, and how: byte ranges or event IDs), ``events`` (an event stream read far
enough to resume it) and ``sse`` (an event stream's events and their fields, as a policy's
``retry_event`` is shown them).
"""
