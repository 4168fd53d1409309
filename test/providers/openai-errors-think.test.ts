import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpenAIProvider, stripThink, ThinkFilter } from '../../src/providers/openai.ts';

// SPEC §18: reasoning never reaches a chat. OpenAI-compatible servers send it as `reasoning_content` / `reasoning`
// (never read) or as a leading <think>…</think> block in the content (stripped, plain and streamed).

const samples = [
  '<think>SECRET plan</think>Hello there',
  '  \n<think>\nSECRET a < b </thin k> </think>\n\nHello <think>kept</think>',
  '<think></think>Hi',
  '<think>SECRET never closed',
  '<think>SECRET</think>   ',
  'Hello <think>not at the start</think>',
  '<thinking>not the tag</thinking>',
  '<thi',
  '   ',
  '< think>x',
  '',
];

/** Runs the filter over pieces; returns what it passed on, each emission separately. */
const filtered = (pieces: string[]): string[] => {
  const out: string[] = [];
  const filter = new ThinkFilter((text) => out.push(text));
  for (const piece of pieces) filter.push(piece);
  filter.end();
  return out;
};

describe('<think> blocks', () => {
  it('strips a think block at the very start of a plain answer, and an unclosed one entirely', () => {
    expect(stripThink('<think>SECRET plan</think>Hello there')).toBe('Hello there');
    expect(stripThink('  \n<think>\nSECRET a < b </thin k> </think>\n\nHello <think>kept</think>')).toBe('Hello <think>kept</think>');
    expect(stripThink('<think>SECRET never closed')).toBe('');
    expect(stripThink('Hello <think>not at the start</think>')).toBe('Hello <think>not at the start</think>');
    expect(stripThink('<thinking>x</thinking>')).toBe('<thinking>x</thinking>');
    expect(stripThink('  plain')).toBe('  plain');
  });

  it('streams the same text as the plain answer, wherever the pieces are split, and nothing from inside the block', () => {
    for (const sample of samples) {
      const expected = stripThink(sample);
      const check = (pieces: string[]) => {
        const out = filtered(pieces);
        expect(out.join(''), JSON.stringify(pieces)).toBe(expected);
        for (const text of out) expect(text).not.toContain('SECRET');
        expect(out.every((text) => text.length > 0)).toBe(true);
      };
      check([sample]);
      check([...sample]);
      for (let i = 0; i <= sample.length; i++) {
        for (let j = i; j <= sample.length; j++) check([sample.slice(0, i), sample.slice(i, j), sample.slice(j)]);
      }
    }
  });

  it('passes an answer without a block through as it comes, holding only a possible <think> start', () => {
    expect(filtered(['Hel', 'lo'])).toEqual(['Hel', 'lo']);
    expect(filtered(['<', 'b>bold'])).toEqual(['<b>bold']);
    expect(filtered([' ', ' <th', 'ere'])).toEqual(['  <there']);
    expect(filtered(['<think>a</think>', 'Hi', ' you'])).toEqual(['Hi', ' you']);
  });
});

describe('OpenAI provider: reasoning never reaches the chat', () => {
  let server: Server;
  let baseURL: string;
  /** The next answer: stream deltas (streamed calls) or the message (plain calls). */
  let deltas: Record<string, unknown>[] = [];
  let message: Record<string, unknown> = {};

  beforeAll(async () => {
    server = createServer((req, res) => {
      let raw = '';
      req.on('data', (chunk: Buffer) => { raw += chunk.toString(); });
      req.on('end', () => {
        const body = JSON.parse(raw) as { stream?: boolean };
        const base = { id: 'x', created: 1, model: 'deepseek-reasoner' };
        if (!body.stream) {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: 'stop' }] }));
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (const delta of deltas) res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`);
        res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
        res.end('data: [DONE]\n\n');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const provider = () => new OpenAIProvider({
    id: 'deepseek', apiKey: 'k', baseUrl: baseURL, model: 'deepseek-reasoner', contextWindow: 8000, maxTokens: 100,
    correlationHeader: 'x-correlation-id', maxRetries: 0, timeoutMs: 5000,
  });
  const ask = (onDelta?: (text: string) => void) =>
    provider().complete({ model: 'deepseek-reasoner', messages: [{ role: 'user', content: 'hi' }], correlationId: 'r' }, onDelta ? { onDelta } : {});

  it('ignores reasoning_content and reasoning, and strips a leading <think> block, in a plain answer', async () => {
    message = { content: '\n<think>SECRET 1</think>\n\nThe answer.', reasoning_content: 'SECRET 2', reasoning: 'SECRET 3' };
    const response = await ask();
    expect(response.content).toBe('The answer.');
    expect(JSON.stringify(response)).not.toContain('SECRET');
  });

  it('streams nothing of the reasoning: reasoning_content deltas, and a <think> block split across chunks', async () => {
    deltas = [
      { role: 'assistant', content: '' },
      { reasoning_content: 'SECRET 1' },
      { reasoning: 'SECRET 2' },
      { content: ' <th' },
      { content: 'ink>SEC' },
      { content: 'RET 3</th' },
      { content: 'ink' },
      { content: '>\n' },
      { content: '\nThe ', reasoning_content: 'SECRET 4' },
      { content: 'answer.' },
    ];
    const seen: string[] = [];
    const response = await ask((text) => seen.push(text));
    expect(seen).toEqual(['The ', 'answer.']);
    expect(response.content).toBe('The answer.');
    expect(JSON.stringify(response)).not.toContain('SECRET');
  });

  it('streams nothing at all when the <think> block never closes', async () => {
    deltas = [{ content: '<think>' }, { content: 'SECRET and on' }];
    const seen: string[] = [];
    expect((await ask((text) => seen.push(text))).content).toBe('');
    expect(seen).toEqual([]);
  });
});
