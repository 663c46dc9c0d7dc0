// Lint rules: typescript-eslint's recommended type-aware set, plus the project's own few.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

const NO_HTTP = {
  group: ['**/http/*', '**/service/http/*'],
  message: 'only src/service/http and src/service/app import from http/: throw the errors of src/service/errors.ts instead',
};
const SERVICE_SEES_TARGETS_ONLY = {
  group: ['**/agent/*/*', '**/agent/*/*/*', '!**/agent/targets/registry.ts'],
  message:
    "the service learns about targets through src/target and the registry (src/agent/targets/registry.ts), never the agent's internals",
};
const BELOW_THE_PROGRAMS = {
  group: ['**/agent/**', '**/service/**', '**/lab/**'],
  message: 'this layer is below the agent and the service: it imports neither',
};
const NO_REGISTRY = {
  group: ['**/target/registry.ts'],
  message: "a target's capabilities are given as data (src/target/capabilities.ts); the registry is not looked up here",
};
const TARGET_CONTRACT = {
  group: ['**/agent/*/*', '**/agent/*/*/*', '!**/agent/base/*', '**/service/**', '**/knobs/**', '**/lab/**'],
  message: 'src/target is below the knobs and the targets: it imports the protocol, PostgreSQL rules and the base layer only',
};

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
      eqeqeq: ['error', 'smart'],
    },
  },
  // Layers point down (docs/architecture.md, "Layers"). Each block below names what its files may
  // not import; a later block for the same files would replace an earlier one's list, so every
  // file is in one block only.
  {
    // The service's features know nothing of HTTP: only the routes (http/) and the wiring (app/)
    // import from http/. The service learns about targets through the registry, never the agent.
    files: ['src/service/**/*.ts'],
    ignores: ['src/service/http/**', 'src/service/app/**'],
    rules: { 'no-restricted-imports': ['error', { patterns: [NO_HTTP, SERVICE_SEES_TARGETS_ONLY] }] },
  },
  {
    files: ['src/service/http/**/*.ts', 'src/service/app/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [SERVICE_SEES_TARGETS_ONLY] }] },
  },
  {
    // Below the agent and the service: the protocol, PostgreSQL's rules, the knobs, the measure
    // and the optimizer are given a target's capabilities as data and never look one up.
    files: ['src/protocol/**/*.ts', 'src/postgres/**/*.ts', 'src/knobs/**/*.ts', 'src/measure/**/*.ts', 'src/optimizer/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [NO_HTTP, BELOW_THE_PROGRAMS, NO_REGISTRY] }] },
  },
  {
    // The target contract sits under the knobs and the targets: the agent's base layer only.
    files: ['src/target/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [NO_HTTP, TARGET_CONTRACT] }] },
  },
  {
    files: ['src/agent/**/*.ts', 'src/lab/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [NO_HTTP] }] },
  },
  {
    // The session engine stays in small pieces (issue 42): one module per state, none long.
    files: ['src/service/tuning/**/*.ts'],
    rules: { 'max-lines': ['error', { max: 400 }], 'max-lines-per-function': ['error', { max: 80 }] },
  },
  {
    // Targets are closed: outside its folder, no code names a target's kind (the registry does).
    // The lab starts real Patroni processes, which is not naming the target.
    files: ['src/**/*.ts'],
    ignores: ['src/agent/targets/**', 'src/lab/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'Literal[value=/^(managed-a|managed-a-cluster|managed-b-flex|managed-c|patroni)$/]',
          message: "a target's kind is named in its own folder and the registry only: ask the registry (src/agent/targets/registry.ts)",
        },
      ],
    },
  },
  {
    // node:test's test() and describe() return promises the runner awaits itself.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-floating-promises': 'off' },
  },
  {
    files: ['**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { ...tseslint.configs.disableTypeChecked.languageOptions, globals: globals.node },
  },
);
