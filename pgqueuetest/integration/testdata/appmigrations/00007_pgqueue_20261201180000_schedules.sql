-- pgqueue: periodic jobs. One row per declared schedule of a queue (Worker.AddPeriodic), shared by
-- every process that declares it. handled_until is the occurrence up to which the schedule is
-- done: every occurrence at or before it has been enqueued or skipped by the schedule's policy
-- for missed runs. A process enqueues the jobs of later occurrences in the transaction that moves
-- handled_until past them, with a conditional update (WHERE handled_until = <the value it read>),
-- so two processes can never both enqueue one occurrence. last_at is the latest occurrence
-- enqueued (NULL until one is); spec is the schedule as last declared, for listings.

-- +goose Up
CREATE TABLE pgqueue_schedules (
    queue         text        NOT NULL,
    name          text        NOT NULL,
    spec          text        NOT NULL,
    handled_until timestamptz NOT NULL,
    last_at       timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, name)
);

COMMENT ON TABLE pgqueue_schedules IS 'pgqueue: the periodic jobs of each queue and the latest occurrence each has handled';

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261201180000::bigint';

-- +goose Down
CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261201160000::bigint';

DROP TABLE pgqueue_schedules;
