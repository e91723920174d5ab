-- The deployment this database belongs to: one row, the same id in every
-- service's schema, written by the migrator and compared at boot with the one
-- the broker's streams carry (packages/shared/src/deployment.ts).
CREATE TABLE "tracking"."deployment" (
    "singleton" BOOLEAN NOT NULL DEFAULT true,
    "deployment_id" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "deployment_pkey" PRIMARY KEY ("singleton"),
    CONSTRAINT "deployment_one_row" CHECK ("singleton")
);
