import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Two projects. `fast` (`npm test`): every test file but the long runs. `slow`: the long runs, named
 * `*.slow.test.ts` (the cluster chaos runs, the kill -9 and crash series that restart real gateway processes
 * again and again); `npm run test:all` (and CI) runs both. A single file of either runs by its path:
 * `npx vitest run test/cluster/chaos/chaos.slow.test.ts`.
 */
const SLOW = 'test/**/*.slow.test.ts';

export default defineConfig({
  test: {
    testTimeout: 20_000,
    hookTimeout: 20_000,
    projects: [
      { extends: true, test: { name: 'fast', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, SLOW] } },
      { extends: true, test: { name: 'slow', include: [SLOW] } },
    ],
  },
});
