! coherence_norm.f90 - Fortran twin of coherence_norm.c: a heat loop in a data
! region whose host code reads the grid without `update self` (the BAD
! variant: a coherence bug, not a performance one).
!
! The allocatable grids u and unew live on the device for the whole time
! loop, from
! line 63: `!$acc data copy(u, unew)`. Every EVERY steps the host computes
! the grid's norm, reading u on the host at
! line 85: `total = total + u(i, j) * u(i, j) ! the host reads u`
! With VARIANT bad (the default) the host copy is the one from before the
! loop and nothing brings the device's back; with VARIANT fixed
! line 80: `!$acc update self(u)`
! comes before the norm. On a GPU the bad variant's norms stay at the first
! value and differ from the reference (MISMATCH, exit 1); on the host
! fallback (no device copies) both variants are right.
!
! Usage: coherence_norm_f90 [NX [NY [STEPS [EVERY [VARIANT]]]]]
!        defaults: 1024 1024 100 10 bad; VARIANT is bad or fixed
!
! Expected profile (GCC 12 / libgomp; S = STEPS, E = EVERY, B = 8*NX*NY):
!   the data region: one upload and one download of B bytes per grid;
!   line 65: `!$acc parallel loop collapse(2) present(u, unew) ! stencil`
!   the stencil, S launches;
!   line 72: `!$acc parallel loop collapse(2) present(u, unew) ! copy back`
!   the copy back into u, S launches; with VARIANT fixed floor(S/E)
!   downloads of B at the update self.
!   With `accprof run --check coherence` on a GPU, VARIANT bad: stale host
!   reads of u at the norm's line, the device copy written by the copy-back
!   construct; `accprof analyze` reports one C1 proposing
!   `!$acc update self(u)` before the norm loop. VARIANT fixed: no finding.
!   On the host fallback the check says it does not apply.
!
! Output: "step <s> norm <n>" every EVERY steps, "norm: <final norm of the
! host's u after the region>", "time: ...", "checksum: <sum of u>", then
! "reference: match" when every printed norm and the final grid equal a
! plain CPU computation (relative 1e-9), else "reference: MISMATCH" and exit
! status 1. Bad args: exit 2.
program coherence_norm
  implicit none
  integer, parameter :: dp = kind(1.0d0)
  integer :: nx, ny, steps, every, reports, s, i, j
  logical :: fixed, match
  real(dp), allocatable :: u(:, :), unew(:, :), r(:, :), rnew(:, :), norms(:)
  real(dp) :: total, want, t1
  integer(8) :: c0, c1, rate

  if (command_argument_count() > 5) then
    write (0, '(a)') 'usage: coherence_norm_f90 [NX [NY [STEPS [EVERY [bad|fixed]]]]]'
    stop 2
  end if
  nx = arg(1, 1024, 3)
  ny = arg(2, 1024, 3)
  steps = arg(3, 100, 1)
  every = arg(4, 10, 1)
  fixed = variant(5)
  reports = steps / every
  allocate(u(nx, ny), unew(nx, ny), norms(reports + 1))
  call init(u)
  call init(unew)
  norms = 0

  call system_clock(c0, rate)
  !$acc data copy(u, unew)
  do s = 1, steps
    !$acc parallel loop collapse(2) present(u, unew) ! stencil
    do j = 2, ny - 1
      do i = 2, nx - 1
        unew(i, j) = u(i, j) + 0.2_dp * (u(i - 1, j) + u(i + 1, j) + u(i, j - 1) + u(i, j + 1) &
                                         - 4.0_dp * u(i, j))
      end do
    end do
    !$acc parallel loop collapse(2) present(u, unew) ! copy back
    do j = 1, ny
      do i = 1, nx
        u(i, j) = unew(i, j)
      end do
    end do
    if (mod(s, every) == 0) then
      if (fixed) then
        !$acc update self(u)
      end if
      total = 0
      do j = 1, ny
        do i = 1, nx
          total = total + u(i, j) * u(i, j) ! the host reads u
        end do
      end do
      norms(s / every) = sqrt(total)
      write (*, '(a, i0, a, es19.12)') 'step ', s, ' norm ', norms(s / every)
    end if
  end do
  !$acc end data
  call system_clock(c1)
  t1 = real(c1 - c0, dp) / real(rate, dp)
  write (*, '(a, es19.12)') 'norm: ', sqrt(sum(u * u))
  write (*, '(a, f0.3, a)') 'time: ', t1, ' s'
  write (*, '(a, es19.12)') 'checksum: ', sum(u)

  allocate(r(nx, ny), rnew(nx, ny))
  call init(r)
  call init(rnew)
  match = .true.
  do s = 1, steps
    do j = 2, ny - 1
      do i = 2, nx - 1
        rnew(i, j) = r(i, j) + 0.2_dp * (r(i - 1, j) + r(i + 1, j) + r(i, j - 1) + r(i, j + 1) &
                                         - 4.0_dp * r(i, j))
      end do
    end do
    r = rnew
    if (mod(s, every) == 0) then
      total = 0
      do j = 1, ny
        do i = 1, nx
          total = total + r(i, j) * r(i, j)
        end do
      end do
      want = sqrt(total)
      if (.not. (abs(norms(s / every) - want) <= 1e-9_dp * max(1.0_dp, want))) match = .false.
    end if
  end do
  if (.not. all(abs(u - r) <= 1e-9_dp * max(1.0_dp, abs(r)))) match = .false.
  if (match) then
    write (*, '(a)') 'reference: match'
  else
    write (*, '(a)') 'reference: MISMATCH'
    error stop 1
  end if
contains
  subroutine init(a)
    real(dp), intent(out) :: a(:, :)
    a = 0
    a(1, :) = 1
    a(:, 1) = 1
  end subroutine init

  integer function arg(i, def, lo)
    integer, intent(in) :: i, def, lo
    character(len=64) :: text
    integer :: ios
    arg = def
    if (command_argument_count() < i) return
    call get_command_argument(i, text)
    read (text, *, iostat=ios) arg
    if (ios /= 0 .or. arg < lo) then
      write (0, '(a, i0, a, i0, a)') 'coherence_norm_f90: argument ', i, ' must be an integer >= ', lo, &
        ', got ''' // trim(text) // ''''
      stop 2
    end if
  end function arg

  ! "bad" (the default) is false, "fixed" is true.
  logical function variant(i)
    integer, intent(in) :: i
    character(len=64) :: text
    variant = .false.
    if (command_argument_count() < i) return
    call get_command_argument(i, text)
    if (text == 'fixed') then
      variant = .true.
    else if (text /= 'bad') then
      write (0, '(a, i0, a)') 'coherence_norm_f90: argument ', i, ' must be bad or fixed, got ''' // &
        trim(text) // ''''
      stop 2
    end if
  end function variant
end program coherence_norm
