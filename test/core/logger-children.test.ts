import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, silentLogger } from '../../src/core/logger.ts';

const SECRET = 'sk-live-0123456789abcdef';

function capture(level = 'info') {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger({ level, secrets: [SECRET], destination }), lines };
}

/** Bindings that count how often pino reads them (it does when a child is made). */
function counted(values: Record<string, string>) {
  const reads = { n: 0 };
  const bindings = {};
  for (const [key, value] of Object.entries(values)) {
    Object.defineProperty(bindings, key, { enumerable: true, get: () => { reads.n++; return value; } });
  }
  return { bindings, reads };
}

describe('child loggers (made when first written through)', () => {
  it('write their own and their parents\' bindings, at the levels the parent writes', () => {
    const { logger, lines } = capture('info');
    const child = logger.child({ correlationId: 'c-1', channel: 'webchat' });
    const grandchild = child.child({ sessionKey: 'agent:main:main' });
    grandchild.debug('not written');
    grandchild.info({ n: 1 }, 'turn done');
    child.warn('slow');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ level: 30, service: 'switchboard', correlationId: 'c-1', channel: 'webchat', sessionKey: 'agent:main:main', n: 1, msg: 'turn done' });
    expect(lines[1]).toMatchObject({ level: 40, correlationId: 'c-1', channel: 'webchat', msg: 'slow' });
    expect(lines[1]).not.toHaveProperty('sessionKey');
  });

  it('read nothing of their bindings until a line is written, and nothing for lines below the level', () => {
    const { logger, lines } = capture('warn');
    const { bindings, reads } = counted({ correlationId: 'c-2' });
    const child = logger.child(bindings);
    const grandchild = child.child({ sessionKey: 'k' });
    child.info('below the level');
    grandchild.debug('below the level');
    expect(child.isLevelEnabled('info')).toBe(false);
    expect(child.isLevelEnabled('error')).toBe(true);
    expect(child.isLevelEnabled('nonsense')).toBe(false);
    expect(reads.n).toBe(0);
    expect(lines).toHaveLength(0);
    grandchild.error('written');
    expect(reads.n).toBeGreaterThan(0);
    expect(lines).toEqual([expect.objectContaining({ correlationId: 'c-2', sessionKey: 'k', msg: 'written' })]);
  });

  it('keep the secret scrubbing of the process logger', () => {
    const { logger, lines } = capture('info');
    logger.child({ correlationId: 'c-3' }).child({ peer: 'p' }).error({ detail: `key ${SECRET}` }, `refused ${SECRET}`);
    expect(JSON.stringify(lines)).not.toContain(SECRET);
    expect(lines[0]).toMatchObject({ correlationId: 'c-3', peer: 'p', detail: 'key [redacted]' });
  });

  it('take a level of their own when given one, and their level and bindings can be read', () => {
    const { logger, lines } = capture('info');
    const verbose = logger.child({ component: 'probe' }, { level: 'debug' });
    verbose.debug('written at debug');
    expect(lines).toEqual([expect.objectContaining({ component: 'probe', msg: 'written at debug', level: 20 })]);
    const child = logger.child({ a: '1' });
    expect(child.level).toBe('info');
    expect(child.bindings()).toEqual({ service: 'switchboard', a: '1' });
    child.level = 'debug';
    child.debug('now written');
    expect(lines[1]).toMatchObject({ a: '1', msg: 'now written' });
  });

  it('of a silent logger write nothing', () => {
    const logger = silentLogger();
    const child = logger.child({ a: '1' }).child({ b: '2' });
    for (const level of ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const) child[level]('nothing');
    expect(child.isLevelEnabled('fatal')).toBe(false);
  });
});
