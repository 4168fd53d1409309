/** A cancellable timer signal; tests pass one they fire themselves. */
export interface TimeoutHandle {
  signal: AbortSignal;
  clear(): void;
}

/** A real timer as a {@link TimeoutHandle}. */
export function realTimeout(ms: number): TimeoutHandle {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error('tool timeout')), ms);
  timer.unref?.();
  return { signal: controller.signal, clear: () => clearTimeout(timer) };
}
