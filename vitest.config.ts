import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["packages/**/src/**/*.test.ts", "services/**/src/**/*.test.ts", "tests/**/*.test.ts"],
    exclude: ["**/node_modules/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Each file has its own database and nats-server; two cores: keep it modest.
    fileParallelism: true,
    maxWorkers: 3,
    pool: "forks",
  },
});
