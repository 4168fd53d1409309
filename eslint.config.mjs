// ESLint (flat config) with typescript-eslint's type-checked rules: `npm run lint`, run by .ci/run.
import js from '@eslint/js';
import stylistic from '@stylistic/eslint-plugin';
import tseslint from 'typescript-eslint';

/** Node's globals, for the few plain .mjs files (TypeScript files get theirs from @types/node). */
const node = Object.fromEntries(['process', 'console', 'URL', 'Buffer', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'setImmediate', 'structuredClone', 'fetch']
  .map((name) => [name, 'readonly']));

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'reports/', 'coverage/', '.stryker-tmp/', 'bench/results/', 'src/http/assets/', 'test/dashboard/screenshots/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['*.mjs', 'vitest*.config.ts', 'bin/*.mjs', 'scripts/*.mjs'] }, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { '@stylistic': stylistic },
    rules: {
      // Lines are long in this code base by choice; this is the ceiling (strings, URLs and regexes aside).
      '@stylistic/max-len': ['error', { code: 200, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreRegExpLiterals: true, ignoreUrls: true }],
      // `_name` marks a value left out on purpose (`const { raw: _raw, ...stored } = message`).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', caughtErrors: 'none' }],
      // Async functions without await implement promise-returning interfaces; that is not a bug.
      '@typescript-eslint/require-await': 'off',
      // Rejecting with what was caught (unknown) passes the original error on, as `throw` in a catch does.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true, allowThrowingAny: true }],
      // `let x!: T` declared before the closures that use it and assigned once later (main.ts wiring) stays `let`.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // Input sanitizing matches control characters on purpose (`[\x00-\x1f]`, ASCII checks).
      'no-control-regex': 'off',
    },
  },
  {
    // Grapheme-cluster classes list combining marks, ZWJ and variation selectors on purpose.
    files: ['src/core/text-split.ts'],
    rules: { 'no-misleading-character-class': 'off' },
  },
  {
    files: ['**/*.mjs'],
    languageOptions: { globals: node },
    rules: { '@typescript-eslint/no-unsafe-argument': 'off', '@typescript-eslint/no-unsafe-assignment': 'off', '@typescript-eslint/no-unsafe-member-access': 'off' },
  },
  {
    // Tests read untyped JSON from the wire and pass methods to expect(); fakes answer HTTP from async handlers.
    files: ['test/**', 'bench/**'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/unbound-method': 'off',
      '@typescript-eslint/only-throw-error': 'off',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
    },
  },
);
