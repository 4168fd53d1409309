import { readFileSync } from 'node:fs';
import type { HttpApp } from './app.ts';

const page = readFileSync(new URL('./assets/dashboard.html', import.meta.url), 'utf8');

/** `GET /`: the dashboard (sessions, their token totals and history) with the web chat. */
export function mountDashboard(app: HttpApp): void {
  app.get('/', (c) => c.html(page));
}
