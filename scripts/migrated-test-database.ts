/** Tests that talk to the services' schemas directly: a fresh database, every schema migrated. */
import { createTestDatabase, type TestDatabase } from "@whereabouts/shared/testing";
import { migrateAll } from "./migrate.ts";

/** A fresh test database (createTestDatabase) with every service schema migrated, quietly. */
export async function createMigratedDatabase(label: string): Promise<TestDatabase> {
  const database = await createTestDatabase(label);
  await migrateAll({ DATABASE_URL: database.url }, () => undefined);
  return database;
}
