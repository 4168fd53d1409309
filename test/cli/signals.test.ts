import { afterEach, describe, expect, it } from 'vitest';
import { lastUser, type FakeReply } from '../fakes/fake-openai.ts';
import { startProcess } from '../helpers/process.ts';
import { until } from '../helpers/wait.ts';
import { useTempDir, useFakeOpenAI } from '../helpers/fixtures.ts';

describe('switchboard start and SIGINT (Ctrl-C)', () => {
  let release: (() => void) | undefined;
  const tmp = useTempDir();
  // The model answers only when the test lets it: the turn is running when the signal comes.
  const fake = useFakeOpenAI((r) => new Promise<FakeReply>((resolve) => { release = () => resolve({ content: `re: ${lastUser(r)}` }); }));
  afterEach(async () => {
    release?.();
  });

  it('stops taking messages, lets the running turn finish and answer, then exits 0', async () => {
    const proc = startProcess(tmp.dir, { SWITCHBOARD_LOG_LEVEL: 'info', OPENAI_BASE_URL: fake.baseURL, OPENAI_API_KEY: 'sk-test', OPENAI_MODEL: 'gpt-test' });
    const url = await proc.url;
    const post = (text: string) => fetch(`${url}/webchat/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'alice', text }) });
    const running = post('finish me');
    await until(() => fake.requests.length === 1, 'the turn to reach the model');

    proc.child.kill('SIGINT');
    await until(() => proc.lines.some((l) => l.includes('shutting down')), 'the shutdown to start');
    const refused = await post('too late').catch(() => undefined);
    if (refused) expect(refused.status).toBe(503);

    release!();
    const answered = await running;
    expect(answered.status).toBe(200);
    expect(((await answered.json()) as { reply: string }).reply).toBe('re: finish me');
    expect(await proc.exited).toBe(0);
    expect(proc.lines.some((l) => l.includes('"msg":"stopped"'))).toBe(true);
    expect(fake.requests).toHaveLength(1);
  }, 30_000);
});
