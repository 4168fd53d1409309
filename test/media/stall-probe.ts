import { readFileSync } from 'node:fs';

/**
 * The event loop's worst stall while something runs: a timer asks to run every `intervalMs`; the longest gap
 * beyond that between two runs is how long the loop did not turn. On a loaded machine that includes time the
 * main thread waited for a core, which says nothing about the code under test; so on Linux the probe also
 * reads the main thread's own CPU time (`/proc/self/task/<pid>/schedstat`, nanoseconds) and reports the
 * longest gap during which the thread was actually running: the time code held the loop ({@link stop}).
 */
export interface StallProbe {
  /** Resolves once the timer ran a few times, with what was measured until then forgotten. */
  settled(): Promise<StallProbe>;
  /** Stops; the worst stall in ms (the main thread's CPU time within the gap where it can be read, else the wall time). */
  stop(): number;
  /** The worst gap in wall-clock ms, whatever held the thread (scheduling included). */
  wall(): number;
  /** Every gap over 10 ms as `wall/cpu@msSinceStart`. */
  gaps(): string[];
}

const SCHEDSTAT = `/proc/self/task/${process.pid}/schedstat`;

function cpuMs(): number | undefined {
  try {
    return Number(readFileSync(SCHEDSTAT, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return undefined;
  }
}

export function stallProbe(intervalMs = 2): StallProbe {
  let last = performance.now();
  let lastCpu = cpuMs();
  let t0 = last;
  let worst = 0;
  let worstWall = 0;
  const gaps: string[] = [];
  const note = (now: number): void => {
    const cpu = cpuMs();
    const wall = now - last - intervalMs;
    const busy = cpu !== undefined && lastCpu !== undefined ? Math.min(wall, cpu - lastCpu) : wall;
    if (wall > 10) gaps.push(`${Math.round(wall)}/${Math.round(busy)}@${Math.round(last - t0)}`);
    worst = Math.max(worst, busy);
    worstWall = Math.max(worstWall, wall);
    last = now;
    lastCpu = cpuMs();
  };
  const timer = setInterval(() => note(performance.now()), intervalMs);
  const probe: StallProbe = {
    async settled() {
      for (let i = 0; i < 3; i++) await new Promise((resolve) => setTimeout(resolve, intervalMs));
      worst = 0;
      worstWall = 0;
      gaps.length = 0;
      t0 = performance.now();
      return probe;
    },
    stop() {
      clearInterval(timer);
      note(performance.now());
      return worst;
    },
    wall: () => worstWall,
    gaps: () => gaps,
  };
  return probe;
}
