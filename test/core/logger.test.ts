import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ChannelError, ProviderError } from '../../src/core/errors.ts';
import { createLogger } from '../../src/core/logger.ts';

const SECRET = 'sk-live-0123456789abcdef';

function capture(secrets: string[] = [SECRET]) {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger({ level: 'debug', secrets, destination }), lines };
}

type Logged = { type: string; message: string; stack: string; code?: string; cause?: Logged; status?: number; retryable?: boolean };

describe('error log lines', () => {
  for (const secrets of [[SECRET], []]) {
    it(`keep message, stack, code and cause ${secrets.length ? 'with' : 'without'} a secret configured`, () => {
      const { logger, lines } = capture(secrets);
      const cause = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
      logger.error({ err: new ChannelError('DISCORD_SEND_FAILED', 'Discord refused the reply', cause) }, 'send failed');
      const err = lines[0]!.err as Logged;
      expect(err.type).toBe('ChannelError');
      expect(err.message).toBe('Discord refused the reply');
      expect(err.stack).toContain('Discord refused the reply');
      expect(err.stack).toContain('logger.test.ts');
      expect(err.code).toBe('DISCORD_SEND_FAILED');
      expect(err.status).toBe(502);
      expect(err.cause).toMatchObject({ type: 'Error', message: 'connect ECONNREFUSED 127.0.0.1:1', code: 'ECONNREFUSED' });
      expect(err.cause!.stack).toContain('ECONNREFUSED');
    });
  }

  it('scrubs secrets from message, stack, cause and other fields, under any key', () => {
    const { logger, lines } = capture();
    const cause = new Error(`401 for https://api.example/bot${SECRET}/getMe`);
    const error = new ProviderError('PROVIDER_AUTH', `key ${SECRET} was refused`, { cause, retryable: false });
    logger.error({ err: error }, 'provider failed');
    logger.warn({ error, correlationId: 'c-1' }, 'under another key');
    logger.error(error, 'bare error');
    const text = JSON.stringify(lines);
    expect(text).not.toContain(SECRET);
    for (const line of lines) {
      const logged = (line.err ?? line.error) as Logged;
      expect(logged.message).toBe('key [redacted] was refused');
      expect(logged.stack).toContain('key [redacted] was refused');
      expect(logged.code).toBe('PROVIDER_AUTH');
      expect(logged.retryable).toBe(false);
      expect(logged.cause!.message).toBe('401 for https://api.example/bot[redacted]/getMe');
    }
    expect(lines[1]!.correlationId).toBe('c-1');
  });

  it('follows a long or circular cause chain to a bound', () => {
    const { logger, lines } = capture();
    const a = new Error('a') as Error & { cause?: unknown };
    const b = new Error('b', { cause: a });
    a.cause = b;
    logger.error({ err: a }, 'loop');
    expect((lines[0]!.err as Logged).cause!.message).toBe('b');
  });

  it('scrubs secrets from plain strings and nested objects', () => {
    const { logger, lines } = capture();
    logger.info({ url: `https://x/${SECRET}`, nested: { deep: [SECRET] } }, `message with ${SECRET}`);
    expect(JSON.stringify(lines)).not.toContain(SECRET);
    expect(lines[0]!.url).toBe('https://x/[redacted]');
  });
});
