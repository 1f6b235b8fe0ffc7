"""The streaming lakehouse engine: pipelines of Spark SQL steps and state handlers into Delta."""
