/**
 * A grouped bar chart as a standalone SVG: one group per category, one bar per series at the mean of its
 * values, with every value drawn as a dot on its bar (so the spread across seeds stays visible). Values
 * are fractions in [0, 1], labelled in percent.
 */

export interface BarSeries {
  name: string;
  /** values[category] = the values (e.g. one per seed) of that category. */
  values: number[][];
}

const COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759"];
const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

export function barChartSvg(
  title: string,
  categories: readonly string[],
  series: readonly BarSeries[],
): string {
  const W = 760;
  const H = 380;
  const m = { l: 48, r: 16, t: 40, b: 70 };
  const plotW = W - m.l - m.r;
  const plotH = H - m.t - m.b;
  const y = (v: number) => m.t + plotH * (1 - Math.max(0, Math.min(1, v)));
  const groupW = plotW / categories.length;
  const barW = (groupW * 0.7) / series.length;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${esc(title)}</text>`,
  ];
  for (let t = 0; t <= 10; t += 2) {
    const v = t / 10;
    parts.push(
      `<line x1="${m.l}" x2="${W - m.r}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`,
      `<text x="${m.l - 6}" y="${y(v) + 4}" text-anchor="end">${t * 10}%</text>`,
    );
  }
  categories.forEach((cat, c) => {
    const gx = m.l + c * groupW + groupW * 0.15;
    series.forEach((s, k) => {
      const vals = s.values[c] ?? [];
      const mean = vals.length ? vals.reduce((a, b) => a + b, 0) / vals.length : 0;
      const x = gx + k * barW;
      const color = COLORS[k % COLORS.length]!;
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${y(mean).toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${(y(0) - y(mean)).toFixed(1)}" fill="${color}" fill-opacity="0.75"/>`,
        `<text x="${(x + barW / 2).toFixed(1)}" y="${(y(mean) - 4).toFixed(1)}" text-anchor="middle" font-size="10">${(100 * mean).toFixed(0)}</text>`,
      );
      for (const v of vals) {
        parts.push(
          `<circle cx="${(x + barW / 2 - 1).toFixed(1)}" cy="${y(v).toFixed(1)}" r="2.5" fill="black" fill-opacity="0.6"/>`,
        );
      }
    });
    // Long labels wrap after their commas, one line each.
    const cx = (m.l + c * groupW + groupW / 2).toFixed(1);
    const lines = cat
      .split(/,\s*/)
      .map((line, i) => `<tspan x="${cx}" dy="${i === 0 ? 0 : 14}">${esc(line)}</tspan>`)
      .join("");
    parts.push(`<text x="${cx}" y="${H - m.b + 18}" text-anchor="middle">${lines}</text>`);
  });
  series.forEach((s, k) => {
    const x = m.l + k * 110;
    parts.push(
      `<rect x="${x}" y="${H - 24}" width="12" height="12" fill="${COLORS[k % COLORS.length]}" fill-opacity="0.75"/>`,
      `<text x="${x + 18}" y="${H - 14}">${esc(s.name)}</text>`,
    );
  });
  parts.push("</svg>");
  return parts.join("\n");
}
