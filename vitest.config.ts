import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Two projects. `fast` (`npm test`): every test file but the long runs, in one process per worker that keeps
 * its modules from file to file (`isolate: false`: loading the gateway's modules and SDKs again for each of
 * some 180 files cost more than the tests themselves), one worker per core (the tests mostly wait on sockets
 * and child processes). `slow`: the long runs, named `*.slow.test.ts` (the cluster chaos runs, the kill -9 and
 * crash series that restart real gateway processes again and again), each file in a fresh process, one at a
 * time beside the others; `npm run test:all` (and CI) runs both. A single file of either runs by its path:
 * `npx vitest run test/cluster/chaos/chaos.slow.test.ts`.
 */
const SLOW = 'test/**/*.slow.test.ts';

export default defineConfig({
  test: {
    testTimeout: 20_000,
    hookTimeout: 20_000,
    projects: [
      {
        extends: true,
        test: { name: 'fast', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, SLOW], isolate: false, maxWorkers: '100%' },
      },
      { extends: true, test: { name: 'slow', include: [SLOW], maxWorkers: 1 } },
    ],
  },
});
