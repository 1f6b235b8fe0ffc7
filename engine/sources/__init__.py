"""Streaming sources, each registered as the pipeline's raw view.

Every source has `value` (the record as text), `origin` (where it came from: a file path,
topic:partition:offset, or socket:host:port) and `timestamp` (when it arrived: the file's
modification time, the Kafka message time, or the time the socket line was read), so one SQL
file reads any of them. kafka adds key, topic, partition and offset (Spark's own connector where
the session has its jar, else engine/sources/kafka.py: `kafka_connector`). A socket is read by
engine/sources/socket_lines.py, whose offsets go on from the checkpoint; it cannot replay: see
docs/decisions.md.
"""
