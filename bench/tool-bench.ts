import { appendFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { z } from 'zod';
import { toolSchemaTokens } from '../src/tokens/tokens.ts';
import { loadConfig } from '../src/config/load.ts';
import { TOOL_PRESETS } from '../src/config/schema.ts';
import { silentLogger } from '../src/core/logger.ts';
import type { InboundMessage } from '../src/core/message.ts';
import { startGateway } from '../src/main.ts';
import { defineTool } from '../src/tools/tool.ts';
import { mean, nowMs, round } from './stats.ts';

/** Tool-loop overhead at one concurrency: the gateway's tool iterations against the same client doing the rounds bare. */
export interface ToolLevel {
  concurrency: number;
  messages: number;
  /** LLM calls per message (tool rounds + the final answer). */
  callsPerMessage: number;
  floorUsPerIteration: number;
  gatewayUsPerIteration: number;
  /** floor time / gateway time for the same work (1 = no overhead). */
  ratio: number;
  addedUsPerIteration: number;
}

const NOOP = { type: 'function' as const, function: { name: 'noop', description: 'does nothing', parameters: { type: 'object', properties: {} } } };

async function closedLoop(concurrency: number, total: number, send: (worker: number, i: number) => Promise<void>): Promise<number> {
  const perWorker = Math.ceil(total / concurrency);
  const t0 = nowMs();
  await Promise.all(Array.from({ length: concurrency }, async (_, w) => { for (let i = 0; i < perWorker; i++) await send(w, i); }));
  return nowMs() - t0;
}

/** The floor: the openai client runs the same rounds, appends each call and result to a JSONL file. */
async function floorRun(baseURL: string, dir: string, concurrency: number, total: number, rounds: number): Promise<number> {
  const client = new OpenAI({ apiKey: 'sk-bench', baseURL, maxRetries: 0 });
  await mkdir(dir, { recursive: true });
  return closedLoop(concurrency, total, async (w, i) => {
    const file = path.join(dir, `${w}-${i}.jsonl`);
    const messages: ChatCompletionMessageParam[] = [{ role: 'system', content: 'bench' }, { role: 'user', content: `work rounds=${rounds}` }];
    for (;;) {
      const completion = await client.chat.completions.create({ model: 'bench', messages, tools: [NOOP], max_completion_tokens: 4096 });
      const message = completion.choices[0]!.message;
      const calls = message.tool_calls ?? [];
      messages.push({ role: 'assistant', content: message.content, ...(calls.length ? { tool_calls: calls } : {}) });
      await appendFile(file, `${JSON.stringify(messages.at(-1))}\n`);
      if (!calls.length) break;
      for (const call of calls) {
        messages.push({ role: 'tool', tool_call_id: call.id, content: '{"ok":true}' });
        await appendFile(file, `${JSON.stringify(messages.at(-1))}\n`);
      }
    }
  });
}

async function gatewayRun(baseURL: string, dir: string, concurrency: number, total: number, rounds: number, tag: string): Promise<number> {
  const config = loadConfig({
    cwd: dir, env: {}, dotenv: false,
    overrides: {
      stateDir: path.join(dir, 'data'), logLevel: 'silent',
      providers: { default: { kind: 'openai', baseUrl: baseURL, apiKey: 'sk-bench', model: 'bench', maxRetries: 0 } },
      agents: { defaults: { maxConcurrent: concurrency, workspace: path.join(dir, 'workspace'), maxIterationsPerBatch: rounds + 5, tools: { preset: 'none', allow: ['noop'] } } },
      session: { dmScope: 'per-peer', maxActiveSessions: 100_000 },
    },
  });
  const gw = await startGateway({ config, listen: false, adapters: [], logger: silentLogger() });
  gw.runtime.tools.register(defineTool({ name: 'noop', group: 'bench', description: 'does nothing', schema: z.object({}), run: async () => ({ ok: true }) }));
  try {
    return await closedLoop(concurrency, total, async (w, i) => {
      const peer = `${tag}-${w}-${i}`;
      const message: InboundMessage = {
        id: peer, channel: 'webchat', accountId: 'default', chatType: 'direct', chatId: peer, peerId: peer,
        sender: { id: peer }, text: `work rounds=${rounds}`, attachments: [], mentionsBot: true, receivedAt: Date.now(),
      };
      const result = await (await gw.gateway.sink(message)).done;
      if (result?.outcome !== 'replied') throw new Error(`turn ${result?.outcome}: ${result?.replies[0]?.text}`);
    });
  } finally {
    await gw.stop();
  }
}

/** Per tool iteration: the gateway (lanes, registry, validation, transcript, checkpoint, accounting) vs the bare client. */
export async function runToolBench(
  options: { baseURL: string; dir: string; concurrencies: number[]; messages: number; rounds: number },
): Promise<{ levels: ToolLevel[]; schemaTokensByPreset: Record<string, number> }> {
  const levels: ToolLevel[] = [];
  const calls = options.rounds + 1;
  for (const concurrency of options.concurrencies) {
    await floorRun(options.baseURL, path.join(options.dir, `tw-f-${concurrency}`), concurrency, 50, options.rounds);
    await gatewayRun(options.baseURL, path.join(options.dir, `tw-g-${concurrency}`), concurrency, 50, options.rounds, 'warm');
    const floors: number[] = [];
    const gateways: number[] = [];
    for (let r = 0; r < 3; r++) {
      floors.push(await floorRun(options.baseURL, path.join(options.dir, `t-f-${concurrency}-${r}`), concurrency, options.messages, options.rounds));
      gateways.push(await gatewayRun(options.baseURL, path.join(options.dir, `t-g-${concurrency}-${r}`), concurrency, options.messages, options.rounds, `g${r}`));
    }
    const perIteration = (ms: number) => (ms * 1000) / (options.messages * calls);
    const floor = perIteration(Math.min(...floors));
    const gateway = perIteration(Math.min(...gateways));
    levels.push({
      concurrency, messages: options.messages, callsPerMessage: calls,
      floorUsPerIteration: round(floor, 1), gatewayUsPerIteration: round(gateway, 1),
      ratio: round(floor / gateway, 3), addedUsPerIteration: round(gateway - floor, 1),
    });
  }
  return { levels, schemaTokensByPreset: await schemaTokens(options.dir) };
}

/** What each preset's tool schemas cost per request (gpt-4o-mini's tokenizer), from a real gateway's registry. */
async function schemaTokens(dir: string): Promise<Record<string, number>> {
  const config = loadConfig({ cwd: dir, env: {}, dotenv: false, overrides: { stateDir: path.join(dir, 'schema-data'), logLevel: 'silent', agents: { defaults: { workspace: path.join(dir, 'workspace') } } } });
  const gw = await startGateway({ config, listen: false, adapters: [], logger: silentLogger() });
  try {
    const out: Record<string, number> = {};
    for (const preset of TOOL_PRESETS) {
      const schemas = gw.runtime.tools.schemasFor({ preset, allow: [], deny: [] });
      out[preset] = Math.round(mean([schemas.reduce((n, s) => n + toolSchemaTokens(s, 'gpt-4o-mini'), 0)]));
    }
    return out;
  } finally {
    await gw.stop();
  }
}
