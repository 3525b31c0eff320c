"""The policy and what things mean under it: ``rules`` (the stop reasons in order, as data;
what a response or an error means), ``policy`` (``RetryPolicy``), ``peers`` (other retry
libraries' keywords, and what they are here), ``observe`` (every log line, warning and hook
call), ``deadlines`` (the ambient deadline), ``inherit`` (a deadline granted by an incoming
request) and ``testmode`` (testing mode's state)."""
