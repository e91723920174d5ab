-- Users (the spec's second principal kind) and their sessions
-- (EXTENSIONS.md section 1). Passwords are scrypt hashes; session tokens and
-- CSRF tokens are stored only as SHA-256 hashes.
CREATE TABLE "identity"."users" (
    "id" SERIAL NOT NULL,
    "org_id" INTEGER NOT NULL,
    "email" TEXT NOT NULL,
    "password_hash" TEXT NOT NULL,
    "scopes" TEXT[] NOT NULL,
    "disabled_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "users_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "users_org_id_fkey" FOREIGN KEY ("org_id") REFERENCES "identity"."organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
-- Sign-in is by email alone: one user per address (compared lower-cased).
CREATE UNIQUE INDEX "users_email_key" ON "identity"."users" ("email");
CREATE INDEX "users_org_id_idx" ON "identity"."users" ("org_id");

CREATE TABLE "identity"."sessions" (
    "id" SERIAL NOT NULL,
    "user_id" INTEGER NOT NULL,
    "hash" TEXT NOT NULL,
    "csrf_hash" TEXT NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "revoked_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "sessions_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "sessions_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "identity"."users"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE UNIQUE INDEX "sessions_hash_key" ON "identity"."sessions" ("hash");
CREATE INDEX "sessions_user_id_idx" ON "identity"."sessions" ("user_id");

-- Failed sign-ins per email, for the throttle (10 per 15 minutes), shared by every gateway replica.
CREATE TABLE "identity"."login_failures" (
    "id" BIGSERIAL NOT NULL,
    "email" TEXT NOT NULL,
    "failed_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "login_failures_pkey" PRIMARY KEY ("id")
);
CREATE INDEX "login_failures_email_failed_at_idx" ON "identity"."login_failures" ("email", "failed_at");
