// The harness's test page: proves a script from the site runs (the page allows no inline
// script), an event stream arrives, and, on a click, five fetches 100 ms apart.
document.getElementById("status").textContent = "script ran";
new EventSource("/events").onmessage = (event) => {
  document.getElementById("event").textContent = "event: " + event.data;
};
document.getElementById("poll").addEventListener("click", () => {
  let count = 0;
  const timer = setInterval(() => {
    count += 1;
    if (count === 5) clearInterval(timer);
    fetch("/ping.txt?n=" + count).then(() => {
      document.getElementById("polled").textContent = String(count);
    });
  }, 100);
});
