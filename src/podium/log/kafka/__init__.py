"""Apache Kafka as the change log (``log.url = "kafka://..."``)."""
