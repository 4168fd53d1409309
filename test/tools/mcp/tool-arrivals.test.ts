import { describe, expect, it } from 'vitest';
import type { ToolPolicy } from '../../../src/config/schema.ts';
import { ToolArrivals, type ArrivingGroup } from '../../../src/tools/tool-arrivals.ts';
import { capturingLogger } from '../../helpers/log-capture.ts';
import { manualTimers } from '../timers.ts';

/** A server that is connecting until the test says how its attempt ended. */
function server(name: string, waitMs = 10_000) {
  let state: 'connecting' | 'ready' | 'failed' = 'connecting';
  let error: string | undefined;
  let settle: (() => void) | undefined;
  let settling: Promise<void> | undefined;
  const group: ArrivingGroup = {
    group: `mcp:${name}`, toolPrefix: `${name}__`, label: `MCP server ${name}`, waitMs,
    arriving: () => (state === 'connecting' ? (settling ??= new Promise((resolve) => { settle = resolve; })) : undefined),
    missing: () => (state === 'ready' ? undefined : error ?? state),
  };
  const end = (to: 'ready' | 'failed', reason?: string) => { state = to; error = reason; settle?.(); };
  return { group, ready: () => end('ready'), fail: (reason: string) => end('failed', reason) };
}

const policy = (preset: ToolPolicy['preset'], allow: string[] = [], deny: string[] = []): ToolPolicy => ({ preset, allow, deny });

describe('a turn waits for the MCP servers its tools would include that are still connecting', () => {
  const setup = (...servers: ReturnType<typeof server>[]) => {
    const timers = manualTimers();
    const arrivals = new ToolArrivals({ timeout: timers.timeout });
    for (const s of servers) arrivals.add(s.group);
    const { logger, lines } = capturingLogger();
    const turn = { signal: new AbortController().signal, logger };
    return { timers, arrivals, lines, turn, leftOut: () => lines.filter((l) => l.msg.startsWith('left out of this turn')) };
  };

  it('waits only when the policy would enable the server: full, or allow naming its group or one of its tools; not messaging, not when denied', () => {
    const fx = server('fx');
    const { arrivals, turn } = setup(fx);
    expect(arrivals.wait(policy('full'), turn)).toBeInstanceOf(Promise);
    expect(arrivals.wait(policy('minimal', ['mcp:fx']), turn)).toBeInstanceOf(Promise);
    expect(arrivals.wait(policy('none', ['fx__echo']), turn)).toBeInstanceOf(Promise);
    expect(arrivals.wait(policy('messaging'), turn)).toBeUndefined();
    expect(arrivals.wait(policy('minimal', ['mcp:other', 'other__echo', 'memory_write']), turn)).toBeUndefined();
    expect(arrivals.wait(policy('full', [], ['mcp:fx']), turn)).toBeUndefined();
    // Denying one tool still leaves the others: the server is waited for.
    expect(arrivals.wait(policy('full', [], ['fx__die']), turn)).toBeInstanceOf(Promise);
  });

  it('ends when the server is ready, with no line; a ready or failed server is not waited for', async () => {
    const fx = server('fx');
    const { arrivals, turn, timers, leftOut } = setup(fx);
    const wait = arrivals.wait(policy('full'), turn)!;
    expect(timers.pending()).toEqual([10_000]);
    fx.ready();
    await wait;
    expect(timers.pending()).toEqual([]);
    expect(leftOut()).toEqual([]);
    expect(arrivals.wait(policy('full'), turn)).toBeUndefined();
    const broken = server('broken');
    broken.fail('spawn ENOENT');
    expect(setup(broken).arrivals.wait(policy('full'), turn)).toBeUndefined();
  });

  it('at the bound the turn goes on without the server, and one line of the turn says so', async () => {
    const slow = server('slow', 500);
    const fx = server('fx');
    const { arrivals, turn, timers, leftOut } = setup(slow, fx);
    let done = false;
    const wait = arrivals.wait(policy('full'), turn)!.then(() => { done = true; });
    fx.ready();
    await new Promise((resolve) => setImmediate(resolve));
    expect(done).toBe(false);
    timers.fire(500);
    await wait;
    expect(leftOut()).toEqual([expect.objectContaining({
      level: 40, msg: 'left out of this turn: MCP server slow (still connecting after 0.5 s)', leftOut: [{ group: 'mcp:slow', reason: 'still connecting after 0.5 s' }],
    })]);
  });

  it('a server that fails while the turn waits is left out at once, its error in the line', async () => {
    const fx = server('fx');
    const { arrivals, turn, timers, leftOut } = setup(fx);
    const wait = arrivals.wait(policy('full'), turn)!;
    fx.fail('the connection closed');
    await wait;
    expect(timers.pending()).toEqual([]);
    expect(leftOut().map((l) => l.msg)).toEqual(['left out of this turn: MCP server fx (the connection closed)']);
  });

  it('a stopped turn stops waiting at once, without a line', async () => {
    const fx = server('fx');
    const { arrivals, timers, leftOut, turn } = setup(fx);
    const stop = new AbortController();
    const wait = arrivals.wait(policy('full'), { ...turn, signal: stop.signal })!;
    stop.abort();
    await wait;
    expect(timers.pending()).toEqual([]);
    expect(leftOut()).toEqual([]);
  });
});
