! laplace_bad.f90 - Jacobi iteration for the Laplace equation, first port (the BAD variant).
!
! Fortran twin of laplace_bad.c: the same plate (0 inside, 0 on the top and
! left edges, a ramp from 0 to 100 on the right and bottom edges), the same
! averaging of four neighbours, the same stop at TOL or after ITERS iterations.
! The port has two `kernels` regions per iteration and no data clauses, so
! each region copies both allocatable arrays to the device and back: every
! iteration moves both arrays both ways twice. GCC 12 parallelizes neither
! region well: it runs the stencil region on one GPU thread (it cannot prove
! that a and anew do not overlap) and gives the max-change loop gang
! parallelism only. laplace_good.f90 is the repaired version. Measured on an
! H200 at N = 2048: 8.4 s for 20 iterations, against 0.24 s for
! laplace_good.f90 (mostly its one-time copies).
!
! Usage: laplace_bad_f90 [N [ITERS [TOL]]]     defaults: 1024 20 1e-4
!
! Expected profile (GCC 12 / libgomp; I = iterations done = min(ITERS, until
! the change <= TOL), A = 8*(N+2)**2 bytes = one whole array):
!   line 64: `do while (dt > tol .and. iter < iters)` host loop, I iterations
!   line 65: `!$acc kernels ! stencil`
!     reached I times, I launches of ONE gang of 32 lanes with one lane
!     working (GCC: "assigned OpenACC seq loop parallelism"; expect L3);
!     implicit copy of a and anew: 2 uploads and 2 downloads of A bytes.
!   line 74: `!$acc kernels ! update and max change`
!     reached I times, I launches; gang parallelism only (gangs chosen at
!     run time, one active lane per gang); implicit copy of a and anew again
!     (2 uploads + 2 downloads of A bytes) plus the scalar dt.
!   Per iteration: 2 launches, 4 uploads + 4 downloads of A bytes; total
!   8*I*A bytes against 2*A for laplace_good.f90.
!   Findings to expect: D6 (hoist `!$acc data copy(a) create(anew)` above
!   the do while loop), D1/D2/D4 (the same unchanged arrays go up and down
!   repeatedly), L3 (single-gang reduction: use
!   `!$acc parallel loop reduction(max:dt)`).
!
! Output: "checksum: <sum of the inner points>", then "reference: match" when
! the result equals a plain CPU computation of the same number of iterations
! (relative 1e-9), else "reference: MISMATCH" and exit status 1.
program laplace_bad
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  real(dp), allocatable :: a(:,:), anew(:,:), ref(:,:)
  integer :: n, iters, iter, i, j
  integer(8) :: t0, t1, rate
  real(dp) :: tol, dt, ref_dt, total, diff
  character(len=32) :: buf

  n = int_arg(1, 1024)
  iters = int_arg(2, 20)
  tol = real_arg(3, 1.0e-4_dp)
  if (n < 1 .or. iters < 0 .or. .not. (tol >= 0.0_dp)) then
    write(*, '(a)') 'usage: laplace_bad_f90 [N>=1 [ITERS>=0 [TOL>=0]]]'
    stop 2
  end if
  write(*, '(a,i0,a,i0,a,i0,a,es9.2)') 'laplace_bad_f90: ', n, ' x ', n, &
      ' inner points, at most ', iters, ' iterations, tolerance ', tol

  allocate(a(0:n+1, 0:n+1), anew(0:n+1, 0:n+1), ref(0:n+1, 0:n+1))
  call set_edges(a, n)
  anew = a

  call system_clock(t0, rate)
  dt = huge(1.0_dp)
  iter = 0
  do while (dt > tol .and. iter < iters)
    !$acc kernels ! stencil
    do j = 1, n
      do i = 1, n
        anew(i, j) = 0.25_dp * (a(i-1, j) + a(i+1, j) + a(i, j-1) + a(i, j+1))
      end do
    end do
    !$acc end kernels

    dt = 0.0_dp
    !$acc kernels ! update and max change
    do j = 1, n
      do i = 1, n
        dt = max(dt, abs(anew(i, j) - a(i, j)))
        a(i, j) = anew(i, j)
      end do
    end do
    !$acc end kernels
    iter = iter + 1
  end do
  call system_clock(t1)
  write(buf, '(f12.3)') real(t1 - t0, dp) / real(rate, dp)
  write(*, '(3a)') 'time: ', trim(adjustl(buf)), ' s'
  if (iter == 0) dt = 0.0_dp
  write(*, '(a,i0,a,es13.6)') 'iterations: ', iter, ', last max change: ', dt

  total = sum(a(1:n, 1:n))
  write(buf, '(es20.12)') total
  write(*, '(2a)') 'checksum: ', trim(adjustl(buf))

  call reference(ref, n, iter, ref_dt)
  diff = maxval(abs(a - ref))
  write(*, '(a,es10.3)') 'max difference: ', diff
  ! The largest value on the plate is 100; NaN never compares as close.
  if (all(abs(a - ref) <= 1.0e-9_dp * 100.0_dp) .and. &
      (iter == 0 .or. abs(dt - ref_dt) <= 1.0e-9_dp * 100.0_dp)) then
    write(*, '(a)') 'reference: match'
  else
    write(*, '(a)') 'reference: MISMATCH'
    stop 1
  end if

contains

  ! Fixed edge values, zero inside.
  subroutine set_edges(t, n)
    integer, intent(in) :: n
    real(dp), intent(out) :: t(0:n+1, 0:n+1)
    integer :: i, j
    t = 0.0_dp
    do i = 0, n + 1
      t(i, n+1) = 100.0_dp * i / (n + 1)
    end do
    do j = 0, n + 1
      t(n+1, j) = 100.0_dp * j / (n + 1)
    end do
  end subroutine set_edges

  ! Plain CPU Jacobi for exactly `iters` iterations.
  subroutine reference(t, n, iters, dt)
    integer, intent(in) :: n, iters
    real(dp), intent(out) :: t(0:n+1, 0:n+1), dt
    real(dp), allocatable :: tn(:,:)
    integer :: it, i, j
    allocate(tn(0:n+1, 0:n+1))
    call set_edges(t, n)
    tn = t
    dt = 0.0_dp
    do it = 1, iters
      do j = 1, n
        do i = 1, n
          tn(i, j) = 0.25_dp * (t(i-1, j) + t(i+1, j) + t(i, j-1) + t(i, j+1))
        end do
      end do
      dt = 0.0_dp
      do j = 1, n
        do i = 1, n
          dt = max(dt, abs(tn(i, j) - t(i, j)))
          t(i, j) = tn(i, j)
        end do
      end do
    end do
  end subroutine reference

  integer function int_arg(pos, def)
    integer, intent(in) :: pos, def
    character(len=64) :: s
    integer :: stat
    int_arg = def
    if (command_argument_count() < pos) return
    call get_command_argument(pos, s)
    read(s, *, iostat=stat) int_arg
    if (stat /= 0) then
      write(*, '(3a)') 'bad integer argument: ', trim(s)
      stop 2
    end if
  end function int_arg

  real(dp) function real_arg(pos, def)
    integer, intent(in) :: pos
    real(dp), intent(in) :: def
    character(len=64) :: s
    integer :: stat
    real_arg = def
    if (command_argument_count() < pos) return
    call get_command_argument(pos, s)
    read(s, *, iostat=stat) real_arg
    if (stat /= 0) then
      write(*, '(3a)') 'bad number argument: ', trim(s)
      stop 2
    end if
  end function real_arg

end program laplace_bad
