/**
 * `strftime_now(format)` as transformers provides it to chat templates (Llama 3.x stamps the date with
 * `strftime_now("%d %b %Y")`): the common C directives on the local clock.
 */

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];

const pad = (n: number, width = 2) => String(n).padStart(width, "0");

export function strftime(format: string, d: Date): string {
  return format.replace(/%([a-zA-Z%])/g, (whole, c: string) => {
    switch (c) {
      case "a":
        return (DAYS[d.getDay()] as string).slice(0, 3);
      case "A":
        return DAYS[d.getDay()] as string;
      case "b":
        return (MONTHS[d.getMonth()] as string).slice(0, 3);
      case "B":
        return MONTHS[d.getMonth()] as string;
      case "d":
        return pad(d.getDate());
      case "m":
        return pad(d.getMonth() + 1);
      case "y":
        return pad(d.getFullYear() % 100);
      case "Y":
        return String(d.getFullYear());
      case "H":
        return pad(d.getHours());
      case "I":
        return pad(d.getHours() % 12 || 12);
      case "p":
        return d.getHours() < 12 ? "AM" : "PM";
      case "M":
        return pad(d.getMinutes());
      case "S":
        return pad(d.getSeconds());
      case "j": {
        const start = new Date(d.getFullYear(), 0, 1);
        return pad(Math.floor((d.getTime() - start.getTime()) / 86_400_000) + 1, 3);
      }
      case "%":
        return "%";
      default:
        return whole;
    }
  });
}

export function strftimeNow(format: unknown): string {
  return strftime(String(format), new Date());
}
