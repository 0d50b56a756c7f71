-- An application's own first migration; pgqueue's follow, written by
-- pgqueue.WriteGooseMigrations(dir, 2).

-- +goose Up
CREATE TABLE users (
    email      text PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose StatementBegin
CREATE FUNCTION users_lower_email() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.email := lower(NEW.email);
    RETURN NEW;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER users_lower_email BEFORE INSERT ON users
    FOR EACH ROW EXECUTE FUNCTION users_lower_email();

-- +goose Down
DROP TABLE users;
DROP FUNCTION users_lower_email();
