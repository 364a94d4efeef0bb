/* queue_files.h - what queue_files.c calls in queue_files_step.c. */
#ifndef QUEUE_FILES_H
#define QUEUE_FILES_H
void step_relax(long n, const double *restrict u, double *restrict v);
void step_smooth(long n, double *restrict u, const double *restrict v);
#endif
