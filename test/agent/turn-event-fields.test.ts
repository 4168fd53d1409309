import { describe, expect, it } from 'vitest';
import { scopedEvent, type TurnScope } from '../../src/agent/turn-events.ts';

const scope: TurnScope = { correlationId: 'c-1', sessionKey: 'agent:main:webchat:direct:p', sessionId: 'sid-1', channel: 'webchat', agentId: 'main' };

describe('turn event fields', () => {
  it('are the scope\'s fields and the event\'s own, with no parent correlation id unless the scope has one', () => {
    const event = scopedEvent(scope, { outcome: 'replied', durationMs: 12, at: 1000 });
    expect(event).toEqual({ correlationId: 'c-1', sessionKey: 'agent:main:webchat:direct:p', sessionId: 'sid-1', channel: 'webchat', agentId: 'main', outcome: 'replied', durationMs: 12, at: 1000 });
    expect('parentCorrelationId' in event).toBe(false);
    expect(Object.keys(event)).toEqual(['correlationId', 'sessionKey', 'sessionId', 'channel', 'agentId', 'outcome', 'durationMs', 'at']);
  });

  it('carry the parent correlation id of a spawned turn, and leave the scope as it was', () => {
    const child: TurnScope = { ...scope, parentCorrelationId: 'c-0' };
    const event = scopedEvent(child, { at: 5 });
    expect(event).toEqual({ ...child, at: 5 });
    expect(Object.keys(event)).toEqual(['correlationId', 'sessionKey', 'sessionId', 'channel', 'agentId', 'parentCorrelationId', 'at']);
    expect(child).toEqual({ ...scope, parentCorrelationId: 'c-0' });
    expect(event).not.toBe(child);
  });
});
