import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import type { StatusReport } from '../../src/accounting/status-report.ts';
import { TurnEvents } from '../../src/agent/turn-events.ts';
import { silentLogger } from '../../src/core/logger.ts';
import type { HttpApp } from '../../src/http/app.ts';
import { DashboardEvents, type DashboardStatus } from '../../src/http/dashboard-events.ts';
import { readiness } from '../../src/http/ready-route.ts';
import type { PairedPeer, PairingRequest } from '../../src/routing/pairing.ts';
import type { SessionEntry } from '../../src/sessions/entry.ts';
import { readSse, type SseReader } from './sse.ts';

const KEY = 'agent:main:telegram:direct:42';
const scope = { correlationId: 'c-1', sessionKey: KEY, sessionId: 's-1', channel: 'telegram' as const, agentId: 'main' };
const usage = { inputTokens: 1, outputTokens: 2, cacheReadTokens: 0, cacheWriteTokens: 0 };

function statusWith(channelStatus: 'running' | 'failed', uptimeSeconds = 1): StatusReport {
  return {
    version: '9.9.9', uptimeSeconds, sessions: { active: 1, persisted: 1 }, providers: [], queue: { running: 0, queued: 0 }, mcp: [],
    channels: [{ id: 'telegram', accountId: 'default', status: channelStatus, ...(channelStatus === 'failed' ? { supervision: { state: 'gave-up', attempts: 1, lastError: 'token refused' } } : {}) }],
  };
}

describe('the dashboard event stream', () => {
  let live: DashboardEvents | undefined;
  let reader: SseReader | undefined;
  afterEach(async () => {
    await reader?.cancel();
    live?.close();
    reader = undefined;
    live = undefined;
  });

  function start() {
    const events = new TurnEvents(silentLogger());
    const world = {
      status: statusWith('running'),
      pairing: { pending: [] as PairingRequest[], paired: [] as PairedPeer[] },
      entries: [{ key: KEY, sessionId: 's-1', updatedAt: 1, runState: 'idle', messageCount: 2, tokens: { input: 1, output: 2, cacheRead: 0, cacheWrite: 0 }, compactionCount: 0 } as SessionEntry],
      statusCalls: 0,
      storeDown: false,
      pairingDown: false,
    };
    live = new DashboardEvents({
      events, version: '9.9.9', startedAt: 1234, logger: silentLogger(), tickMs: 10, heartbeatMs: 10_000,
      status: async () => { world.statusCalls++; return world.status; },
      pairing: async () => {
        if (world.pairingDown) throw new Error('SQLITE_CANTOPEN: unable to open database file');
        return world.pairing;
      },
      // The gateway's own /readyz check, on the same channels as the status report.
      readiness: () => readiness({
        pingStore: async () => { if (world.storeDown) throw new Error('SQLITE_CANTOPEN: unable to open database file'); },
        channels: () => world.status.channels, isClosing: () => false,
      }),
      activeSessions: () => world.entries.map((entry) => ({ entry })),
    });
    const app = new Hono() as unknown as HttpApp;
    live.mount(app, (c) => c.req.header('x-test-session'));
    return { events, world, app };
  }

  it('says hello (reconnect within a second), then the status and pairing; turn events become session events at once', async () => {
    const { events, app } = start();
    const response = await app.request('/dashboard/events');
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    reader = readSse(response);
    const hello = await reader.next();
    expect(hello).toMatchObject({ event: 'hello', data: { version: '9.9.9', startedAt: 1234 }, retry: 1000 });
    expect((await reader.next()).event).toBe('status');
    expect((await reader.next())).toMatchObject({ event: 'pairing', data: { pending: [], paired: [] } });
    events.emit('onTurnStart', { ...scope, at: 1 });
    events.emit('onLlmCall', { ...scope, kind: 'turn', providerId: 'p', modelId: 'm', usage, isEstimated: false, estimatedInputTokensByComponent: { system: 0, bootstrap: 0, tools: 0, history: 0, toolResults: 0, userInput: 0, images: 0 }, retries: 0, durationMs: 1, at: 2 });
    events.emit('onToolCall', { ...scope, name: 'memory_write', ok: true, outcome: 'ok', durationMs: 1, at: 3 });
    events.emit('onTurnEnd', { ...scope, outcome: 'replied', usage, durationMs: 3, at: 4 });
    const reasons = [];
    for (let i = 0; i < 4; i++) reasons.push((await reader.until((e) => e.event === 'session')).data);
    expect(reasons).toEqual(['turn-start', 'llm-call', 'tool-call', 'turn-end'].map((reason) => ({ key: KEY, reason })));
  });

  it('pushes status, pairing and entries when they change (not when only the uptime moves)', async () => {
    const { world, app } = start();
    reader = readSse(await app.request('/dashboard/events'));
    await reader.until((e) => e.event === 'pairing');
    // Let a few ticks pass with only the uptime moving: nothing is pushed.
    const calls = world.statusCalls;
    world.status = statusWith('running', 50);
    await expect.poll(() => world.statusCalls, { timeout: 5000 }).toBeGreaterThan(calls + 3);
    world.status = statusWith('failed', 51);
    const status = await reader.next();
    expect(status.event).toBe('status');
    expect((status.data as StatusReport).channels[0]).toMatchObject({ status: 'failed', supervision: { lastError: 'token refused' } });
    world.pairing = { pending: [{ channel: 'telegram', accountId: 'default', peerId: '42', code: 'ABCD2345', createdAt: 1, expiresAt: 2 }], paired: [] };
    expect(await reader.next()).toMatchObject({ event: 'pairing', data: { pending: [{ code: 'ABCD2345' }] } });
    // An admin reset outside any turn: the entry in memory gets a new session id.
    world.entries = [{ ...world.entries[0]!, sessionId: 's-2' }];
    expect(await reader.next()).toMatchObject({ event: 'session', data: { key: KEY, reason: 'changed' } });
  });

  it('forgets a page that goes away, greets a new one, and close() ends every stream', async () => {
    const { world, app } = start();
    const first = readSse(await app.request('/dashboard/events'));
    reader = readSse(await app.request('/dashboard/events'));
    await first.until((e) => e.event === 'pairing');
    await reader.until((e) => e.event === 'pairing');
    expect(live!.listenerCount).toBe(2);
    await first.cancel();
    await expect.poll(() => live!.listenerCount).toBe(1);
    await reader.cancel();
    await expect.poll(() => live!.listenerCount).toBe(0);
    const calls = world.statusCalls;
    const again = readSse(await app.request('/dashboard/events'));
    await again.until((e) => e.event === 'pairing');
    expect(world.statusCalls).toBeGreaterThan(calls);
    live!.close();
    expect(await again.rest()).toEqual([]);
    expect(live!.listenerCount).toBe(0);
  });

  it('sends /readyz\'s verdict with the status: not ready while the store is down (pairing failing too), or a channel is stopped', async () => {
    const { world, app } = start();
    reader = readSse(await app.request('/dashboard/events'));
    const first = await reader.until((e) => e.event === 'status');
    expect((first.data as DashboardStatus).readiness).toEqual({ ready: true, failing: [] });
    world.storeDown = true;
    world.pairingDown = true;
    const down = await reader.until((e) => e.event === 'status');
    expect((down.data as DashboardStatus).readiness).toEqual({ ready: false, failing: [{ part: 'store', name: 'store', error: 'SQLITE_CANTOPEN: unable to open database file' }] });
    world.storeDown = false;
    world.pairingDown = false;
    world.status = { ...statusWith('running'), channels: [{ id: 'telegram', accountId: 'default', status: 'stopped' }] };
    const stopped = await reader.until((e) => e.event === 'status');
    expect((stopped.data as DashboardStatus).readiness).toEqual({ ready: false, failing: [{ part: 'channel', name: 'telegram/default', status: 'stopped', error: 'stopped' }] });
  });

  it('ends the streams opened with a signed-out session (saying so first), and only those', async () => {
    const { app } = start();
    const mine = readSse(await app.request('/dashboard/events', { headers: { 'x-test-session': 'nonce-a' } }));
    reader = readSse(await app.request('/dashboard/events', { headers: { 'x-test-session': 'nonce-b' } }));
    const bearer = readSse(await app.request('/dashboard/events'));
    for (const r of [mine, reader, bearer]) await r.until((e) => e.event === 'pairing');
    expect(live!.listenerCount).toBe(3);
    live!.endSession('nonce-a');
    expect((await mine.rest()).at(-1)?.event).toBe('signed-out');
    expect(live!.listenerCount).toBe(2);
    await bearer.cancel();
  });
});
