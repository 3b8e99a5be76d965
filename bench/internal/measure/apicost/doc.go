// Package apicost measures what a DNS server costs the API server, in the bytes it sends the
// server and the CPU it spends on it, for the experiments that compare a kubetree replica with an
// in-tree one there (-audit, -steady, -watch-cost): kubetree's audits (MeasureAudits), a window of
// watches under steady EndpointSlice churn (StartChurning, MeasureWindow), the API server's garbage
// collector charged by allocation (Collector), and the goal a kubetree replica is held to (Goal,
// Intervals).
package apicost
