"""What things mean: ``rules`` (the stop reasons in order, as data; what a response or an
error means), ``policy`` (``RetryPolicy``), ``observe`` (every log line and hook call),
``deadlines`` (the ambient deadline), ``inherit`` (a deadline granted by an incoming
request) and ``testmode`` (testing mode's state)."""
