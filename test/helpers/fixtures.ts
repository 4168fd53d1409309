import { afterEach, beforeEach } from 'vitest';
import { startFakeOpenAI, type FakeOpenAI, type FakeReply, type RecordedRequest } from '../fakes/fake-openai.ts';
import { tempDir } from './gateway.ts';

/**
 * The before/after hooks many test files repeat. Call them at the top of a `describe` (or of the file), in the
 * order the things are made: vitest runs after-hooks in reverse, so what was made last is closed first, and a
 * file's own `afterEach` (stopping its gateway) registered after them runs before them.
 */

/** A fresh temporary folder for each test, removed after it: `tmp.dir` is the current test's. */
export function useTempDir(prefix?: string): { readonly dir: string } {
  let current: ReturnType<typeof tempDir> | undefined;
  beforeEach(() => { current = tempDir(prefix); });
  afterEach(() => {
    current?.remove();
    current = undefined;
  });
  return {
    get dir() {
      if (!current) throw new Error('useTempDir: the folder exists only while a test runs');
      return current.dir;
    },
  };
}

/**
 * A fresh fake OpenAI server for each test (answering with `fallback`), closed after it. The returned object
 * stands for the current test's server: reading and setting its fields (`baseURL`, `requests`, `script`,
 * `fallback`) reach that server.
 */
export function useFakeOpenAI(fallback?: (request: RecordedRequest) => FakeReply | Promise<FakeReply>): FakeOpenAI {
  let current: FakeOpenAI | undefined;
  beforeEach(async () => { current = await startFakeOpenAI(fallback); });
  afterEach(async () => {
    await current?.close();
    current = undefined;
  });
  const server = (): FakeOpenAI => {
    if (!current) throw new Error('useFakeOpenAI: the server runs only while a test runs');
    return current;
  };
  return new Proxy({} as FakeOpenAI, {
    get: (_, key) => server()[key as keyof FakeOpenAI],
    set: (_, key, value) => Reflect.set(server(), key, value),
  });
}
