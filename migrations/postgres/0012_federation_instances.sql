-- The administrators' rules for other servers (docs/FEDERATION.md,
-- "Instances"; model::instances): `rule` 0 blocks the host and its
-- subdomains, 1 allows it (once any host is allowed, only allowed hosts
-- federate). `host` is lowercase, without a port.
CREATE TABLE ap_instances (
    host       TEXT    PRIMARY KEY,
    rule       BIGINT  NOT NULL,
    reason     TEXT    NOT NULL DEFAULT '',
    created_at BIGINT  NOT NULL
);
