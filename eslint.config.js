import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["**/node_modules/**", "**/generated/**", "**/dist/**", ".data/**", "docs/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      "no-console": "off",
    },
  },
  {
    files: ["**/*.js"],
    languageOptions: { globals: { process: "readonly", console: "readonly" } },
  },
  {
    // The handheld page runs in the browser.
    files: ["services/gateway/src/handheld/page/**/*.js"],
    languageOptions: {
      sourceType: "module",
      globals: {
        window: "readonly", document: "readonly", navigator: "readonly", fetch: "readonly", indexedDB: "readonly",
        sessionStorage: "readonly", setTimeout: "readonly", setInterval: "readonly", crypto: "readonly", HTMLInputElement: "readonly",
        HTMLSelectElement: "readonly", console: "readonly",
      },
    },
    rules: { "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }] },
  },
);
