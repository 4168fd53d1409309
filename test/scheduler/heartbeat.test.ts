import { describe, expect, it } from 'vitest';
import { hasHeartbeatContent, inActiveHours, isQuietHeartbeat } from '../../src/scheduler/heartbeat.ts';

describe('heartbeat rules (SPEC §17)', () => {
  it('HEARTBEAT.md with only headings, comments, rules and blank lines asks for nothing', () => {
    expect(hasHeartbeatContent('')).toBe(false);
    expect(hasHeartbeatContent('# Heartbeat\n\n## Checks\n<!-- add checks here\nover lines -->\n---\n')).toBe(false);
    expect(hasHeartbeatContent('# Heartbeat\n- check the build\n')).toBe(true);
    expect(hasHeartbeatContent('<!-- a comment --> look at the inbox')).toBe(true);
    expect(hasHeartbeatContent('#hashtag is text, not a heading')).toBe(true);
  });

  it('an answer of HEARTBEAT_OK (with markup or punctuation around it) or nothing is quiet; anything else is said', () => {
    for (const quiet of ['', '  ', 'HEARTBEAT_OK', '**HEARTBEAT_OK**', 'HEARTBEAT_OK.', '`HEARTBEAT_OK`\n', 'heartbeat_ok']) expect(isQuietHeartbeat(quiet), quiet).toBe(true);
    for (const said of ['HEARTBEAT_OK, but the build is red', 'The build is red.', 'HEARTBEATOK']) expect(isQuietHeartbeat(said), said).toBe(false);
  });

  it('active hours are local to the zone and may wrap past midnight', () => {
    const at = (iso: string) => Date.parse(iso);
    // 07:30 UTC is 08:30 in Berlin (CET).
    expect(inActiveHours('08:00-22:00', at('2026-12-02T07:30:00Z'), 'Europe/Berlin')).toBe(true);
    expect(inActiveHours('08:00-22:00', at('2026-12-02T06:30:00Z'), 'Europe/Berlin')).toBe(false);
    expect(inActiveHours('08:00-22:00', at('2026-12-02T21:00:00Z'), 'Europe/Berlin')).toBe(false);
    expect(inActiveHours('22:00-06:00', at('2026-12-02T23:30:00Z'), 'UTC')).toBe(true);
    expect(inActiveHours('22:00-06:00', at('2026-12-02T12:00:00Z'), 'UTC')).toBe(false);
    expect(inActiveHours(undefined, 0, 'UTC')).toBe(true);
  });
});
