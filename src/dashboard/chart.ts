/**
 * The usage chart: requests per UTC day of the billing cycle as an inline SVG bar chart, rendered
 * on the server (no script, no external asset). Colours come from CSS classes (dashboard.css), the
 * geometry from attributes, so it works under a strict Content-Security-Policy. Every bar carries a
 * tooltip (<title>) and data attributes with its day and count.
 */
import type { DayUsage } from '../store/index.js';
import { html, type SafeHtml } from './html.js';

const WIDTH = 640;
const HEIGHT = 220;
const LEFT = 44;
const RIGHT = 8;
const TOP = 12;
const BOTTOM = 34;
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** The smallest "nice" axis maximum (1, 2, 5 × 10^k) at or above `n`. */
export function niceCeiling(n: number): number {
  if (n <= 1) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(n));
  for (const step of [1, 2, 5, 10]) if (step * magnitude >= n) return step * magnitude;
  return 10 * magnitude;
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

export interface ChartOptions {
  /** UTC day (YYYY-MM-DD) to highlight. */
  today?: string;
}

export function usageChart(days: readonly DayUsage[], options: ChartOptions = {}): SafeHtml {
  const total = days.reduce((sum, d) => sum + d.requests, 0);
  const max = niceCeiling(Math.max(0, ...days.map((d) => d.requests)));
  const plotW = WIDTH - LEFT - RIGHT;
  const plotH = HEIGHT - TOP - BOTTOM;
  const slot = plotW / Math.max(1, days.length);
  const barW = Math.max(1, slot * 0.7);
  const y = (v: number) => TOP + plotH - (v / max) * plotH;
  const first = days[0]?.day ?? '';
  const last = days[days.length - 1]?.day ?? '';
  const ticks = max === 1 ? [0, 1] : [0, max / 2, max];
  const labelEvery = days.length > 20 ? 5 : days.length > 10 ? 2 : 1;

  const grid = ticks.map(
    (t) =>
      html`<line class="chart-grid" x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${round(y(t))}" y2="${round(y(t))}"></line><text class="chart-label" x="${LEFT - 6}" y="${round(y(t) + 4)}" text-anchor="end">${t}</text>`,
  );
  const bars = days.map((d, i) => {
    const x = round(LEFT + i * slot + (slot - barW) / 2);
    const h = (d.requests / max) * plotH;
    const top = round(TOP + plotH - h);
    const cls = d.day === options.today ? 'chart-bar chart-today' : 'chart-bar';
    // Days with no request keep an invisible full-height hit area so their tooltip still works.
    return html`<g class="chart-day" data-day="${d.day}" data-requests="${d.requests}"><title>${d.day}: ${plural(d.requests, 'request')}</title><rect class="chart-hit" x="${x}" y="${TOP}" width="${round(barW)}" height="${plotH}"></rect>${d.requests > 0 ? html`<rect class="${cls}" x="${x}" y="${top}" width="${round(barW)}" height="${round(Math.max(h, 1))}"></rect>` : ''}</g>`;
  });
  // Day of the month under every few bars; the month name on the first label and at each new month.
  let lastMonth = '';
  const labels = days.map((d, i) => {
    const lastFar = i === days.length - 1 && i % labelEvery >= Math.min(3, labelEvery);
    if (i % labelEvery !== 0 && !lastFar) return '';
    const month = d.day.slice(5, 7);
    const text = `${Number(d.day.slice(8, 10))}${month !== lastMonth ? ` ${MONTHS[Number(month) - 1]}` : ''}`;
    lastMonth = month;
    return html`<text class="chart-label" x="${round(LEFT + i * slot + slot / 2)}" y="${HEIGHT - 8}" text-anchor="middle">${text}</text>`;
  });

  return html`<svg class="chart" id="usage-chart" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-labelledby="usage-chart-title usage-chart-desc" data-total="${total}" xmlns="http://www.w3.org/2000/svg"><title id="usage-chart-title">Requests per day, ${first} to ${last} (UTC)</title><desc id="usage-chart-desc">${plural(total, 'request')} in this billing cycle.</desc>${grid}<line class="chart-axis" x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${TOP + plotH}" y2="${TOP + plotH}"></line>${bars}${labels}</svg>`;
}
