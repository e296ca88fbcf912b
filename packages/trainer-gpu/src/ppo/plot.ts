/**
 * A small dependency-free SVG line chart: training reward per step and validation reward at the steps
 * where it was measured, on a shared axis. Enough to see at a glance whether a run learned.
 */

export interface Series {
  name: string;
  color: string;
  points: ReadonlyArray<readonly [x: number, y: number]>;
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

function niceTicks(lo: number, hi: number, count: number): number[] {
  if (hi <= lo) return [lo];
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(Number(v.toFixed(10)));
  return out;
}

export function lineChartSvg(
  title: string,
  series: readonly Series[],
  xLabel = "step",
  yLabel = "reward",
): string {
  const W = 640;
  const H = 360;
  const m = { l: 56, r: 16, t: 36, b: 44 };
  const all = series.flatMap((s) => s.points);
  const xs = all.map((p) => p[0]);
  const ys = all.map((p) => p[1]);
  const x0 = Math.min(0, ...xs);
  const x1 = Math.max(1, ...xs);
  let y0 = Math.min(0, ...ys);
  let y1 = Math.max(1, ...ys);
  if (y1 - y0 < 1e-9) {
    y0 -= 0.5;
    y1 += 0.5;
  }
  const sx = (x: number) => m.l + ((x - x0) / (x1 - x0)) * (W - m.l - m.r);
  const sy = (y: number) => H - m.b - ((y - y0) / (y1 - y0)) * (H - m.t - m.b);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">${esc(title)}</text>`,
  ];
  for (const t of niceTicks(y0, y1, 5)) {
    parts.push(
      `<line x1="${m.l}" x2="${W - m.r}" y1="${sy(t).toFixed(1)}" y2="${sy(t).toFixed(1)}" stroke="#e5e5e5"/>`,
      `<text x="${m.l - 6}" y="${(sy(t) + 4).toFixed(1)}" text-anchor="end">${t}</text>`,
    );
  }
  for (const t of niceTicks(x0, x1, 8)) {
    parts.push(`<text x="${sx(t).toFixed(1)}" y="${H - m.b + 16}" text-anchor="middle">${t}</text>`);
  }
  parts.push(
    `<line x1="${m.l}" x2="${m.l}" y1="${m.t}" y2="${H - m.b}" stroke="#333"/>`,
    `<line x1="${m.l}" x2="${W - m.r}" y1="${H - m.b}" y2="${H - m.b}" stroke="#333"/>`,
    `<text x="${W / 2}" y="${H - 8}" text-anchor="middle">${esc(xLabel)}</text>`,
    `<text x="14" y="${H / 2}" text-anchor="middle" transform="rotate(-90 14 ${H / 2})">${esc(yLabel)}</text>`,
  );
  series.forEach((s, i) => {
    if (s.points.length > 0) {
      const d = s.points
        .map((p, k) => `${k ? "L" : "M"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`)
        .join("");
      parts.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"/>`);
      for (const p of s.points) {
        parts.push(
          `<circle cx="${sx(p[0]).toFixed(1)}" cy="${sy(p[1]).toFixed(1)}" r="2.5" fill="${s.color}"/>`,
        );
      }
    }
    const ly = m.t + 4 + i * 16;
    parts.push(
      `<rect x="${m.l + 10}" y="${ly}" width="12" height="3" fill="${s.color}"/>`,
      `<text x="${m.l + 28}" y="${ly + 5}">${esc(s.name)}</text>`,
    );
  });
  parts.push("</svg>");
  return parts.join("\n");
}
