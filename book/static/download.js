// The ".ipynb" entry of sphinx-book-theme's download menu is a plain link opened in a new tab; a host that serves
// notebooks as JSON would show the text instead of saving the file. The download attribute makes it a download.
document.addEventListener("DOMContentLoaded", () => {
  for (const link of document.querySelectorAll(".dropdown-download-buttons a[href$='.ipynb']")) {
    link.setAttribute("download", link.getAttribute("href").split("/").pop());
    link.removeAttribute("target");
  }
});
