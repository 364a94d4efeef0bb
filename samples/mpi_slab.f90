! mpi_slab.f90 - MPI + OpenACC 3-D stencil, slab halos staged through the whole array (the BAD variant).
!
! The shape of a seismic code's first port: each rank owns NZL planes of a
! 3-D field s(NX, NY, 0:NZL+1) (planes 0 and NZL+1 are halos), and every time
! step brings the whole array to the host (`update host(s)`), swaps one plane
! with each neighbour (two MPI_SENDRECV calls on s(:,:,k)), and sends the
! whole array back (`update device(s)`), although MPI read two planes and
! wrote two. Updating only those planes (`update host(s(:,:,1:1))`, ...), or
! passing device addresses to a CUDA-aware MPI, moves NZL/2 times less.
!
! One source for the three Fortran bindings, chosen when compiling (the
! calls are the same in all three): -DUSE_MPI (`use mpi`, sample
! mpi_slab_f90), -DUSE_MPIF_H (`include 'mpif.h'`, mpi_slab_fh) and
! -DUSE_MPI_F08 (`use mpi_f08`, mpi_slab_f08). Build with -cpp.
!
! Usage: mpirun -np P mpi_slab_f90 [NX [NY [NZ [STEPS]]]]   defaults: 128 128 128 20
!
! Expected profile, per rank (GCC 12 / libgomp; S = STEPS, L = planes owned =
! about NZ/P, Q = 8*NX*NY bytes = one plane, B = (L+2)*Q = the array):
!   line 88: `!$acc data copyin(s) create(snew)` reached once: 1 upload of B.
!   line 89: `do step = 1, steps` host time loop, S iterations.
!   line 91: `!$acc update host(s)` S downloads of B bytes.
!   line 93: `call MPI_SENDRECV(s(:, :, 1), plane, MPI_DOUBLE_PRECISION, below, 0, &` and
!   line 96: `call MPI_SENDRECV(s(:, :, nzl), plane, MPI_DOUBLE_PRECISION, above, 1, &`
!     2 calls per step, each sending and receiving one plane (Q bytes).
!   line 100: `!$acc update device(s)` S uploads of B bytes.
!   line 102: `!$acc parallel loop collapse(3) present(s, snew)` and
!   line 112: `!$acc parallel loop collapse(3) present(s, snew)` S launches each.
!   Findings to expect: P1 at lines 91 and 100 (variable s): the updates move
!   B bytes per step where MPI read and wrote 2*Q.
!
! Output (rank 0): "checksum: <sum of the field>", then "reference: match"
! when the sum and the sum of squares equal those of a serial CPU run
! (relative 1e-9), else "reference: MISMATCH"; every rank exits 1 on a
! mismatch.
program mpi_slab
#if defined(USE_MPI_F08)
  use mpi_f08
#elif defined(USE_MPI)
  use mpi
#endif
  implicit none
#if defined(USE_MPIF_H)
  include 'mpif.h'
#endif
  integer, parameter :: dp = kind(1.0d0)
  ! Diffusion number per direction; stable below 1/6.
  real(dp), parameter :: c = 0.15_dp
  integer :: nx, ny, nz, steps, step, rank, size, ierr, nzl, first, below, above, plane
  integer :: i, j, k, ok
  real(dp), allocatable :: s(:, :, :), snew(:, :, :)
  real(dp) :: local(2), total(2), ref(2)

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  nx = arg(1, 128, 3)
  ny = arg(2, 128, 3)
  nz = arg(3, 128, 1)
  steps = arg(4, 20, 0)
  if (nz < size) then
    if (rank == 0) write (0, '(a, i0, a, i0, a)') 'mpi_slab: NZ (', nz, &
      ') must be at least the number of ranks (', size, ')'
    call MPI_FINALIZE(ierr)
    stop 2
  end if

  ! Global planes first+1 .. first+nzl belong to this rank.
  nzl = nz / size
  if (rank < mod(nz, size)) nzl = nzl + 1
  first = rank * (nz / size) + min(rank, mod(nz, size))
  below = rank - 1
  if (rank == 0) below = MPI_PROC_NULL
  above = rank + 1
  if (rank == size - 1) above = MPI_PROC_NULL
  plane = nx * ny
  allocate (s(nx, ny, 0:nzl + 1), snew(nx, ny, 0:nzl + 1))
  do k = 0, nzl + 1
    do j = 1, ny
      do i = 1, nx
        s(i, j, k) = initial(i, j, first + k)
      end do
    end do
  end do
  if (rank == 0) write (*, '(a, 3(i0, a), i0, a, i0, a)') 'mpi_slab: ', nx, ' x ', ny, ' x ', nz, &
    ' field, ', steps, ' steps, ', size, ' ranks'

  !$acc data copyin(s) create(snew)
  do step = 1, steps
    ! The whole array to the host for the exchange.
    !$acc update host(s)
    ! First owned plane down, top halo from above; last owned plane up, bottom halo from below.
    call MPI_SENDRECV(s(:, :, 1), plane, MPI_DOUBLE_PRECISION, below, 0, &
                      s(:, :, nzl + 1), plane, MPI_DOUBLE_PRECISION, above, 0, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_SENDRECV(s(:, :, nzl), plane, MPI_DOUBLE_PRECISION, above, 1, &
                      s(:, :, 0), plane, MPI_DOUBLE_PRECISION, below, 1, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    ! And the whole array back.
    !$acc update device(s)

    !$acc parallel loop collapse(3) present(s, snew)
    do k = 1, nzl
      do j = 2, ny - 1
        do i = 2, nx - 1
          snew(i, j, k) = s(i, j, k) + c * (s(i - 1, j, k) + s(i + 1, j, k) + s(i, j - 1, k) &
                                            + s(i, j + 1, k) + s(i, j, k - 1) + s(i, j, k + 1) &
                                            - 6.0_dp * s(i, j, k))
        end do
      end do
    end do
    !$acc parallel loop collapse(3) present(s, snew)
    do k = 1, nzl
      do j = 2, ny - 1
        do i = 2, nx - 1
          s(i, j, k) = snew(i, j, k)
        end do
      end do
    end do
  end do
  !$acc update host(s(:, :, 1:nzl))
  !$acc end data

  local(1) = sum(s(:, :, 1:nzl))
  local(2) = sum(s(:, :, 1:nzl)**2)
  call MPI_REDUCE(local, total, 2, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  ok = 1
  if (rank == 0) then
    write (*, '(a, es20.12)') 'checksum: ', total(1)
    call reference(ref)
    if (.not. (abs(total(1) - ref(1)) <= 1e-9_dp * abs(ref(1)) .and. &
               abs(total(2) - ref(2)) <= 1e-9_dp * abs(ref(2)))) ok = 0
    write (*, '(a, es20.12, a, es20.12, a, es20.12, a)') 'reference sum: ', ref(1), &
      ', sum of squares: ', ref(2), ' (got ', total(2), ')'
    if (ok == 1) then
      write (*, '(a)') 'reference: match'
    else
      write (*, '(a)') 'reference: MISMATCH'
    end if
  end if
  call MPI_BCAST(ok, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  deallocate (s, snew)
  call MPI_FINALIZE(ierr)
  if (ok /= 1) stop 1

contains

  ! Initial value of global point (i, j, g), g = 0 .. nz + 1 (0 and nz + 1
  ! are the fixed bottom and top planes).
  pure real(dp) function initial(i, j, g)
    integer, intent(in) :: i, j, g
    real(dp) :: x, y, z
    x = real(i - 1, dp) / (nx - 1) - 0.4_dp
    y = real(j - 1, dp) / (ny - 1) - 0.5_dp
    z = real(g, dp) / (nz + 1) - 0.35_dp
    initial = 10.0_dp + 80.0_dp * exp(-(x * x + y * y + z * z) / 0.02_dp)
    ! A warm bottom plane, so heat flows across ranks.
    if (g == 0) initial = initial + 20.0_dp * real(i, dp) / nx
  end function initial

  ! Serial CPU run of the whole field; sums of its nz inner planes.
  subroutine reference(r)
    real(dp), intent(out) :: r(2)
    real(dp), allocatable :: a(:, :, :), b(:, :, :)
    integer :: st
    allocate (a(nx, ny, 0:nz + 1))
    do k = 0, nz + 1
      do j = 1, ny
        do i = 1, nx
          a(i, j, k) = initial(i, j, k)
        end do
      end do
    end do
    b = a
    do st = 1, steps
      do k = 1, nz
        do j = 2, ny - 1
          do i = 2, nx - 1
            b(i, j, k) = a(i, j, k) + c * (a(i - 1, j, k) + a(i + 1, j, k) + a(i, j - 1, k) &
                                           + a(i, j + 1, k) + a(i, j, k - 1) + a(i, j, k + 1) &
                                           - 6.0_dp * a(i, j, k))
          end do
        end do
      end do
      a(:, :, 1:nz) = b(:, :, 1:nz)
    end do
    r(1) = sum(a(:, :, 1:nz))
    r(2) = sum(a(:, :, 1:nz)**2)
  end subroutine reference

  integer function arg(n, def, lo)
    integer, intent(in) :: n, def, lo
    character(len=64) :: text
    integer :: ios
    arg = def
    if (command_argument_count() < n) return
    call get_command_argument(n, text)
    read (text, *, iostat=ios) arg
    if (ios /= 0 .or. arg < lo) then
      write (0, '(a, i0, a, i0, a)') 'mpi_slab: argument ', n, ' must be an integer >= ', lo, &
        ', got ''' // trim(text) // ''''
      call MPI_ABORT(MPI_COMM_WORLD, 2, ierr)
    end if
  end function arg
end program mpi_slab
