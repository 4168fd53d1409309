import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/core/logger.ts';
import { startGateway, type RunningGateway } from '../../src/main.ts';
import { startFakeOpenAI, userText, type FakeOpenAI, type RecordedRequest } from '../fakes/fake-openai.ts';
import { testConfig } from '../helpers/gateway.ts';
import { useTempDir } from '../helpers/fixtures.ts';

const system = (r: RecordedRequest) => r.body.messages[0]!.content ?? '';

describe('agents without a workspace of their own', () => {
  let fake: FakeOpenAI;
  let gw: RunningGateway | undefined;
  const tmp = useTempDir();

  beforeEach(async () => {
    fake = await startFakeOpenAI((r) => {
      const agent = /I am (\w+)/.exec(system(r))?.[1] ?? '?';
      const last = r.body.messages.at(-1)!;
      if (last.role === 'tool') return { content: `${agent} noted it`, usage: null };
      return { toolCalls: [{ id: 'w1', name: 'memory_write', arguments: JSON.stringify({ note: `${agent} remembers ${userText(last.content)}` }) }], usage: null };
    });
  });
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
    await fake.close();
  });

  const notes = (folder: string) => {
    const dir = path.join(tmp.dir, folder, 'memory');
    return readdirSync(dir).map((f) => readFileSync(path.join(dir, f), 'utf8')).join('');
  };

  it('the first agent keeps agents.defaults.workspace, the others get <workspace>-<id>: their own notes and bootstrap files', async () => {
    // testConfig sets agents.defaults.workspace to <tmp>/workspace.
    for (const [folder, rules] of [['workspace', 'Rules of the home agent.'], ['workspace-work', 'Rules of the work agent.']] as const) {
      mkdirSync(path.join(tmp.dir, folder), { recursive: true });
      writeFileSync(path.join(tmp.dir, folder, 'AGENTS.md'), rules);
    }
    const config = testConfig(tmp.dir, {
      providers: { default: { baseUrl: fake.baseURL, apiKey: 'sk-test', model: 'gpt-test', maxRetries: 0 } },
      agents: { list: [{ id: 'home', systemPrompt: 'I am home.' }, { id: 'work', systemPrompt: 'I am work.' }], defaults: { tools: { preset: 'minimal' } } },
    });
    expect(config.agents.map((a) => a.workspace)).toEqual([path.join(tmp.dir, 'workspace'), path.join(tmp.dir, 'workspace-work')]);
    gw = await startGateway({ config, logger: silentLogger() });
    const ask = async (model: string, text: string) => {
      const res = await fetch(`${gw!.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model, user: 'ann', messages: [{ role: 'user', content: text }] }) });
      return ((await res.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content;
    };
    expect(await ask('home', 'the garden')).toBe('home noted it');
    expect(await ask('work', 'the deadline')).toBe('work noted it');
    expect(notes('workspace')).toContain('home remembers the garden');
    expect(notes('workspace')).not.toContain('work remembers');
    expect(notes('workspace-work')).toContain('work remembers the deadline');
    expect(notes('workspace-work')).not.toContain('home remembers');
    const [home, work] = [fake.requests.find((r) => system(r).includes('I am home'))!, fake.requests.find((r) => system(r).includes('I am work'))!];
    expect(system(home)).toContain('Rules of the home agent.');
    expect(system(home)).not.toContain('Rules of the work agent.');
    expect(system(work)).toContain('Rules of the work agent.');
    expect(system(work)).not.toContain('Rules of the home agent.');
  });
});
