-- Input that could not be used, kept with the reason; shared by all pipelines.
CREATE TABLE quarantine (
  pipeline STRING NOT NULL COMMENT 'Pipeline that read the input',
  source STRING COMMENT 'File, topic or socket the input came from',
  raw STRING COMMENT 'The input line as read',
  reason STRING NOT NULL COMMENT 'Why the line was rejected',
  ingested_at TIMESTAMP NOT NULL COMMENT 'When the line was read'
) USING DELTA
TBLPROPERTIES ('lake.mode' = 'append', 'lake.role' = 'quarantine')
